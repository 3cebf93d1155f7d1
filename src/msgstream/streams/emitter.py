"""TimeTickEmitter: allocates timestamps for producers and broadcasts time ticks.

A tick ``T`` promises that no later message on a channel has a timestamp <= ``T``. The
emitter keeps that promise by tracking every allocated timestamp whose send is still in
flight: a tick is at most one below the oldest in-flight timestamp, and is broadcast only
after the sends it covers were acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator

from ..configuration.config import STREAM_DEFAULTS
from ..errors import StreamStateError
from ..observability.logs import fields, get_logger
from ..runtime.scope import AsyncScope, cancel_and_wait
from ..wire.messages import TimeTickMsg
from ..wire.pack import MsgPack
from ..wire.tso import TsoAllocator
from .stream import MsgStream

log = get_logger(__name__)


class TimeTickEmitter(AsyncScope):
    def __init__(
        self,
        stream: MsgStream,
        *,
        interval_s: float = STREAM_DEFAULTS.tick_interval_s,
        allocator: TsoAllocator | None = None,
        source_id: int = 0,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.stream = stream
        self.interval_s = interval_s
        self.allocator = allocator or TsoAllocator()
        self.source_id = source_id
        self.last_tick = 0
        self.ticks_sent = 0
        self._in_flight: Counter[int] = Counter()
        self._tick_ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # --- timestamps -----------------------------------------------------------------------
    def begin(self) -> int:
        """Allocate a timestamp for a send; call :meth:`done` once it was acknowledged."""
        ts = self.allocator.allocate()
        self._in_flight[ts] += 1
        return ts

    def done(self, ts: int) -> None:
        if self._in_flight[ts] <= 0:
            raise StreamStateError(f"timestamp {ts} was not allocated by this emitter")
        self._in_flight[ts] -= 1
        if not self._in_flight[ts]:
            del self._in_flight[ts]

    @contextlib.asynccontextmanager
    async def reserve(self) -> AsyncIterator[int]:
        """``async with emitter.reserve() as ts:`` -- send messages stamped ``ts`` inside."""
        ts = self.begin()
        try:
            yield ts
        finally:
            self.done(ts)

    # --- ticks --------------------------------------------------------------------------------
    def _safe_tick(self) -> int:
        if self._in_flight:
            return min(self._in_flight) - 1
        return self.allocator.allocate()

    async def tick(self) -> int | None:
        """Broadcast a tick now if time can advance; return it (None if it could not)."""
        async with self._lock:
            candidate = self._safe_tick()
            if candidate <= self.last_tick:
                return None
            msg = TimeTickMsg(
                msg_id=next(self._tick_ids), timestamp=candidate, source_id=self.source_id
            )
            await self.stream.broadcast(MsgPack.of(msg))
            self.last_tick = candidate
            self.ticks_sent += 1
            return candidate

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "time tick broadcast failed; retrying next interval",
                    extra=fields(self.stream.client.backend_name),
                )

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="msgstream-tt")

    async def stop(self, final_tick: bool = True) -> None:
        """Stop ticking; by default send one last tick covering everything acknowledged."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if final_tick and not self.stream.closed:
            await self.tick()

    async def _enter(self) -> None:
        self.start()

    async def _exit(self, *, clean: bool) -> None:
        await self.stop(final_tick=clean)
