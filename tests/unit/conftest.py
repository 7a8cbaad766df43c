"""Fixtures of the unit tests of the web side: ``ctx``, the dashboard's :class:`app.context.AppContext` on the test's
``settings`` (store closed after the test; its launcher is built, never started)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.context import AppContext
from app.server import create_context


@pytest.fixture
def ctx(settings) -> Iterator[AppContext]:
    context = create_context(settings)
    try:
        yield context
    finally:
        context.store.close()
