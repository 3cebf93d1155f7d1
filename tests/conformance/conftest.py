"""Every conformance test runs under a :class:`liveness.LoopWatch`: on every backend, a test
during which the event loop was blocked (see :mod:`liveness`) fails, and one that
hangs the loop is interrupted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from harness import BackendHarness
from liveness import LoopWatch


@pytest.fixture(autouse=True)
async def loop_watch(backend: BackendHarness) -> AsyncIterator[LoopWatch]:
    """Watches from after the backend is set up (a broker starts synchronously, once per
    session) to before it is torn down."""
    watch = LoopWatch()
    watch.start()
    yield watch
    await watch.stop()
    assert not watch.blocked, f"{watch.describe()} during this test on {backend.name}"
