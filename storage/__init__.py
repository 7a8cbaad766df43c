"""The dashboard's store: SQLAlchemy models and the :class:`Store` through which every layer reads and writes."""

from storage.models import RunStatus
from storage.store import (
    CompletionRecord,
    DatasetInfo,
    GroupRecord,
    MetricPoint,
    PromptRow,
    RunInfo,
    SearchHit,
    SearchPage,
    Store,
    StoreError,
    sqlite_url,
)

__all__ = [
    "CompletionRecord",
    "DatasetInfo",
    "GroupRecord",
    "MetricPoint",
    "PromptRow",
    "RunInfo",
    "RunStatus",
    "SearchHit",
    "SearchPage",
    "Store",
    "StoreError",
    "sqlite_url",
]
