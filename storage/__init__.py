"""The dashboard's store: SQLAlchemy models (:mod:`storage.tables`), the engine and schema (:mod:`storage.engine`,
:mod:`storage.migrations`), the plain records callers get (:mod:`storage.records`) and the :class:`Store` through
which every layer reads and writes (:mod:`storage.store`)."""

from storage.engine import sqlite_url
from storage.records import (
    CompletionRecord,
    DatasetInfo,
    GroupRecord,
    MetricPoint,
    MetricSummary,
    PromptPage,
    PromptRow,
    RunInfo,
    RunStatus,
    SearchHit,
    SearchPage,
    StoreError,
    SweepInfo,
    TokenStats,
)
from storage.step_cache import StepCache
from storage.store import Store

__all__ = [
    "CompletionRecord",
    "DatasetInfo",
    "GroupRecord",
    "MetricSummary",
    "MetricPoint",
    "PromptPage",
    "PromptRow",
    "RunInfo",
    "RunStatus",
    "SearchHit",
    "SearchPage",
    "StepCache",
    "Store",
    "StoreError",
    "SweepInfo",
    "TokenStats",
    "sqlite_url",
]
