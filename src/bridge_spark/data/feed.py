"""Packs read ahead in one task, so the batcher takes a run of ready packs in one step.

Awaiting ``stream.__anext__()`` in a new task per pack costs a trip round the event loop
per pack, and on each trip every channel reader that has data may decode a whole receive
batch (a thousand Insert messages) before the batcher's task runs again. A
:class:`PackFeed` awaits the stream in one long-lived task; a pack the stream can cut at
once comes back without suspending, so that task moves every ready pack into the feed in
one step, and the batcher drains them with :meth:`PackFeed.get_nowait`.

The feed holds at most ``byte_limit`` payload bytes of packs (plus one pack): beyond the
stream's own buffers, it reads ahead about that much and then waits for room.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from msgstream.runtime.scope import cancel_and_wait
from msgstream.wire.pack import MsgPack


class PackFeed:
    """Reads ``stream`` (a :class:`~msgstream.streams.ttstream.TtMsgStream`) ahead into a bounded
    queue of packs (see the module's docstring)."""

    def __init__(self, stream: AsyncIterator[MsgPack], byte_limit: int) -> None:
        self._stream = stream
        self._byte_limit = byte_limit
        self._packs: deque[tuple[MsgPack, int]] = deque()
        self._bytes = 0
        self._error: BaseException | None = None
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._task = asyncio.get_running_loop().create_task(
            self._pump(), name="msgstream-batcher-feed"
        )

    async def _pump(self) -> None:
        stream = self._stream
        try:
            while True:
                if self._bytes >= self._byte_limit:
                    self._room.clear()
                    await self._room.wait()
                    continue
                pack = await stream.__anext__()
                size = sum(m.size for m in pack.msgs)
                self._packs.append((pack, size))
                self._bytes += size
                self._arrived.set()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # StopAsyncIteration included: handed to the reader
            self._error = exc
            self._arrived.set()

    def get_nowait(self) -> MsgPack | None:
        """The next pack read, None if none is ready yet; raises what ended the reading
        (the stream's error, or ``StopAsyncIteration``) once every pack before it was
        taken."""
        if self._packs:
            pack, size = self._packs.popleft()
            self._bytes -= size
            if self._bytes < self._byte_limit:
                self._room.set()
            return pack
        if self._error is not None:
            raise self._error
        return None

    async def wait(self) -> None:
        """Until :meth:`get_nowait` has something to return (a pack or an error)."""
        while not self._packs and self._error is None:
            self._arrived.clear()
            await self._arrived.wait()

    async def close(self) -> None:
        """Stop reading ahead (the packs read are dropped: the checkpoint, not the
        feed, says where a run resumes)."""
        await cancel_and_wait(self._task)
