"""The run doctor's labelled corpus (``tests/doctor/corpus/*.json``): loading a run, its prefixes, and scoring the
doctor's findings against its labels (read by ``tests/doctor/test_*.py`` and ``benchmarks/bench_doctor.py``).

A corpus file is one run:

- ``name``, ``source`` (``"recorded"``: trained by the product on a CPU and exported by
  ``benchmarks/record_doctor_corpus.py``; ``"synthetic"``: written by ``tests/doctor/make_synthetic.py`` for what a CPU
  cannot produce), ``description``, ``reports`` (public reports of the pathology: papers, issues, blog posts);
- ``config``: the run config fields the doctor reads (``beta``, ``learning_rate``, ``rewards``, ...);
- ``series``: ``key -> [[step, value], ...]`` with TRL's metric names (``null`` for NaN);
- ``groups`` (optional): sampled groups as ``{"step", "row_index", "completions": [{"text", "total_reward",
  "rewards": {rule: score}, "turns": a multi-turn completion's turns (optional, :mod:`grpo_core.tools.turns`)}]}``;
- ``expect``: ``healthy`` (true: no warning or error at any prefix), ``must`` (``code -> {"from_step": the first
  logged step from which the finding must be there, "severity": the least severity that counts, "cause": words its
  title or advice must contain (any case), "forbid": words they must not contain}``), ``must_not`` (codes that must
  never be a warning or an error at any prefix) and ``say_never`` (phrases no finding may contain at any prefix, e.g.
  advice to raise the learning rate of a run whose gradient is 0; each occurrence is a false positive of that code).

Scoring, per check code and per prefix from :data:`FIRST_PREFIX` logged steps on: a *positive* is a prefix at or after
a ``must`` code's ``from_step``; a *negative* is every prefix of a healthy run (for every warning or error code and
the :data:`SCORED_INFO_CODES`) and every prefix of a run for its ``must_not`` codes; anything else (a prefix before
the onset) is not scored. A finding counts when it is there at the labelled severity or above (warnings and errors
for negatives, and the :data:`SCORED_INFO_CODES` at any severity) and, for positives, names its cause.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_core.doctor import Finding, Severity, diagnose
from storage import CompletionRecord, GroupRecord

CORPUS_DIR = Path(__file__).with_name("corpus")
#: The doctor is read while a run trains: scored from this many logged steps on.
FIRST_PREFIX = 10
#: As many groups as the Runs tab's doctor panel reads (``app.tabs.runs.doctor.SAMPLE_GROUPS``).
SAMPLE_GROUPS = 32
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
#: Every code a check can give as a warning or an error (the negatives of a healthy run are scored for each).
ALARM_CODES = (
    "clipped", "entropy_collapse", "entropy_surge", "eval_flat", "grad_vanishing", "grad_zero", "kl", "length_long",
    "nan", "nan_rule", "policy_static", "reward_falling", "reward_flat", "reward_zero", "rule_dominates",
    "rule_errors", "task_rule_falling", "zero_std", "clip_high", "sampling_mismatch", "grad_spike",
    "tools_stopped", "tool_failures", "iteration_limit",
)
#: Information codes scored like the alarms: a healthy run, or a run that lists one in ``must_not``, must not get
#: them at all (the tool checks' "reward paid whether or not the tool was used" is information, not a warning).
SCORED_INFO_CODES = ("reward_without_tool",)


@dataclass(frozen=True)
class CorpusRun:
    """One labelled run (see the module docstring)."""

    name: str
    source: str
    config: dict[str, Any]
    series: dict[str, list[tuple[int, float | None]]]
    groups: tuple[GroupRecord, ...]
    healthy: bool
    must: dict[str, dict[str, Any]]
    must_not: tuple[str, ...]
    say_never: tuple[str, ...] = ()
    reports: tuple[str, ...] = ()
    description: str = ""

    @property
    def steps(self) -> list[int]:
        """The logged steps of ``reward`` (the run's length), ascending."""
        return sorted({int(s) for s, _ in self.series.get("reward", [])})

    def prefix(self, last_step: int) -> dict[str, tuple[list[int], list[float | None]]]:
        """The series as the doctor saw them when ``last_step`` was the latest logged step."""
        out = {}
        for key, points in self.series.items():
            kept = [(int(s), v) for s, v in points if s <= last_step]
            out[key] = ([s for s, _ in kept], [v for _, v in kept])
        return out

    def groups_until(self, last_step: int) -> list[GroupRecord]:
        """The groups the Runs tab's doctor would read then: the latest :data:`SAMPLE_GROUPS`, newest step first."""
        seen = [g for g in self.groups if g.step <= last_step]
        return sorted(seen, key=lambda g: -g.step)[:SAMPLE_GROUPS]

    def prefixes(self) -> Iterator[int]:
        """The last steps of every prefix from :data:`FIRST_PREFIX` logged steps on."""
        yield from self.steps[FIRST_PREFIX - 1:]

    def diagnose_at(self, last_step: int) -> list[Finding]:
        return diagnose(self.prefix(last_step), self.groups_until(last_step), self.config)


def _group(data: dict[str, Any]) -> GroupRecord:
    completions = [
        CompletionRecord(
            index=i, text=c.get("text", ""), total_reward=c.get("total_reward"), rewards=c.get("rewards", {}),
            advantage=c.get("advantage"), truncated=bool(c.get("truncated", False)), turns=c.get("turns"),
        )
        for i, c in enumerate(data["completions"])
    ]
    return GroupRecord(
        step=int(data["step"]), row_index=int(data.get("row_index", 0)), prompt=data.get("prompt", ""),
        completions=completions,
    )


def load(path: Path) -> CorpusRun:
    """One corpus file.

    Raises:
        ValueError: a required field is missing or ``source`` is neither ``recorded`` nor ``synthetic``.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    for required in ("name", "source", "config", "series", "expect", "reports"):
        if required not in data:
            raise ValueError(f"{path.name}: missing {required!r}")
    if data["source"] not in ("recorded", "synthetic"):
        raise ValueError(f"{path.name}: source {data['source']!r} is neither 'recorded' nor 'synthetic'")
    expect = data["expect"]
    return CorpusRun(
        name=data["name"],
        source=data["source"],
        config=data["config"],
        series={k: [(int(s), v) for s, v in points] for k, points in data["series"].items()},
        groups=tuple(_group(g) for g in data.get("groups", [])),
        healthy=bool(expect.get("healthy", False)),
        must=dict(expect.get("must", {})),
        must_not=tuple(expect.get("must_not", ())),
        say_never=tuple(expect.get("say_never", ())),
        reports=tuple(data["reports"]),
        description=data.get("description", ""),
    )


def load_corpus(directory: Path = CORPUS_DIR) -> list[CorpusRun]:
    """Every run of the corpus, by file name."""
    return [load(path) for path in sorted(directory.glob("*.json"))]


def names_cause(finding: Finding, label: dict[str, Any]) -> bool:
    """Whether ``finding`` says every word of ``label["cause"]`` and none of ``label["forbid"]`` (any case)."""
    text = f"{finding.title} {finding.advice} {' '.join(finding.examples)}".lower()
    return all(w.lower() in text for w in label.get("cause", ())) and not any(
        w.lower() in text for w in label.get("forbid", ())
    )


def found(findings: list[Finding], code: str, least: Severity) -> Finding | None:
    return next((f for f in findings if f.code == code and _RANK[f.severity] >= _RANK[least]), None)


@dataclass
class Tally:
    """True and false positives and false negatives of one check code over the scored prefixes."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    negatives: int = 0
    misses: list[str] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def score_prefix(run: CorpusRun, last_step: int, findings: list[Finding], tallies: dict[str, Tally]) -> None:
    """Add one prefix's outcome to ``tallies`` (code -> :class:`Tally`; see the module docstring)."""
    where = f"{run.name}@{last_step}"
    for code, label in run.must.items():
        if last_step < int(label.get("from_step", 0)):
            continue
        hit = found(findings, code, Severity(label.get("severity", "warning")))
        if hit is not None and names_cause(hit, label):
            tallies[code].tp += 1
        else:
            tallies[code].fn += 1
            tallies[code].misses.append(where if hit is None else f"{where} (cause not named)")
    for finding in findings:
        text = f"{finding.title} {finding.advice}".lower()
        for phrase in run.say_never:
            if phrase.lower() in text:
                tallies[finding.code].fp += 1
                tallies[finding.code].alarms.append(f"{where}: says {phrase!r}: {finding.title}")
    negatives = set(run.must_not)
    for code in ALARM_CODES + SCORED_INFO_CODES:
        if code not in run.must and (run.healthy or code in negatives):
            tallies[code].negatives += 1
    alarms = [f for f in findings if f.severity is not Severity.INFO or f.code in SCORED_INFO_CODES]
    for finding in alarms:
        if finding.code in run.must:
            continue  # judged as a positive (before its onset it is not scored)
        if run.healthy or finding.code in negatives:
            tallies[finding.code].fp += 1
            tallies[finding.code].alarms.append(f"{where}: {finding.title}")


def evaluate(runs: list[CorpusRun]) -> dict[str, Tally]:
    """Every run at every prefix: code -> :class:`Tally`."""
    tallies: dict[str, Tally] = defaultdict(Tally)
    for run in runs:
        for last_step in run.prefixes():
            score_prefix(run, last_step, run.diagnose_at(last_step), tallies)
    return dict(tallies)
