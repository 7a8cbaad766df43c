"""The store: every read and write of runs, metrics, groups and datasets goes through :class:`Store`.

The database is the source of truth: any number of browser tabs, a restarted dashboard and the workers read and write
the same rows. ORM rows (:mod:`storage.tables`) never leave the store's modules; callers get the frozen dataclasses of
:mod:`storage.records`. Queries used by the UI are incremental (rows after the last step the page has). The engine
(SQLite pragmas) and the schema's creation and migration are in :mod:`storage.engine`.

As MLflow's SQLAlchemy tracking store, :class:`Store` is one facade composed of a mixin per table family, each in its
own module on the shared engine and sessions of :class:`storage.base.StoreBase`:

========================  ==========================================================================================
:mod:`storage.datasets`   uploaded datasets
:mod:`storage.runs`       a run's life cycle, annotations, alerts; the catalog fingerprint
:mod:`storage.sweeps`     sweeps and their runs; a metric's final and best value across runs
:mod:`storage.metrics`    metric points in long format, read incrementally
:mod:`storage.history`    the downsampled metric history (a chart's first load)
:mod:`storage.groups`     sampled groups, completions and per-token values, by step
:mod:`storage.prompts`    one prompt's groups across steps, the rows sampled most, text search
:mod:`storage.steps`      what one training step records, in one transaction
:mod:`storage.rescorings` rescorings of a run's recorded groups with other reward rules (the reward workbench)
:mod:`storage.api_tokens` API tokens, and the runs a training script records over HTTP (:mod:`grpo_core.integrations`)
:mod:`storage.run_images` the prompt images a training script recorded with its groups
========================  ==========================================================================================
"""

from __future__ import annotations

from storage.api_tokens import ApiTokenQueries
from storage.datasets import DatasetStore
from storage.prompts import PromptStore
from storage.rescorings import RescoringStore  # the reward workbench
from storage.run_images import RunImageStore
from storage.runs import RunStore
from storage.steps import StepStore
from storage.sweeps import SweepStore


class Store(DatasetStore, RunStore, SweepStore, StepStore, PromptStore, RescoringStore, ApiTokenQueries,
            RunImageStore):
    """Reads and writes the dashboard's state in a SQL database.

    Args:
        url: any SQLAlchemy URL, e.g. ``sqlite:////data/grpo.db`` or ``postgresql+psycopg://user@host/db``.
        create: create missing tables (idempotent).

    Every method opens its own short transaction, so one ``Store`` may be shared by threads. The methods are those
    of its parts, one per table family (see this module's docstring).
    """
