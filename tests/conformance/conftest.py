"""Every conformance test runs under a :class:`liveness.LoopWatch`: on every backend, a test
during which the event loop was blocked (see :mod:`liveness`) fails, and one that
hangs the loop is interrupted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from harness import BackendHarness
from liveness import LoopWatch
from msgstream import SubscriptionPosition

_WARMED: set[str] = set()


async def _warm_up(backend: BackendHarness) -> None:
    """Pay each backend's one-off first-use costs (lazy imports, TLS and codec set-up, the
    first connection and batch) once per session, outside the watch: a first send_many on
    Kafka took 130 ms of CPU, once, on a loaded machine."""
    if backend.name in _WARMED:
        return
    _WARMED.add(backend.name)
    client = backend.client()
    channel = backend.channel("warm-up")
    producer = await client.create_producer(channel)
    ids = await producer.send_many([b"a", b"b"])
    await producer.send(b"c")
    consumer = await client.subscribe(channel, "warm-up", SubscriptionPosition.UNKNOWN)
    await consumer.seek(ids[0], inclusive=True)
    await asyncio.wait_for(consumer.receive(), 30)
    consumer.receive_nowait(10)
    await consumer.close()


@pytest.fixture(autouse=True)
async def loop_watch(backend: BackendHarness) -> AsyncIterator[LoopWatch]:
    """Watches from after the backend is set up (a broker starts synchronously, once per
    session) to before it is torn down."""
    await _warm_up(backend)
    watch = LoopWatch()
    watch.start()
    yield watch
    await watch.stop()
    assert not watch.blocked, f"{watch.describe()} during this test on {backend.name}"
