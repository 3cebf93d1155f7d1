"""TtMsgStream: many channels merged into packs aligned on time ticks."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Unpack

from .backend import Client
from .barrier import LateHandler, LatePolicy, TickBarrier, merge_packs
from .errors import InvalidPositionError, StreamStateError
from .pack import MsgPack
from .position import MsgPosition
from .stream import MsgStream, StreamOptions, check_buffer_sizes
from .tso import parse_ts


class TtStreamOptions(StreamOptions, total=False):
    """The keyword options of :class:`TtMsgStream` (and of ``new_ttmsgstream``)."""

    late_policy: LatePolicy
    on_late: LateHandler | None
    channel_buffer_size: int
    channel_buffer_bytes: int
    pursuit_lag_s: float
    pursuit_buffer_size_bytes: int
    pursuit_buffer_time_s: float


class TtMsgStream(MsgStream):
    """Yields one :class:`MsgPack` per advance of the common time tick.

    Seeking to a pack's ``end_positions`` resumes right after that pack: no message lost,
    none repeated. When the stream lags the wall clock by more than ``pursuit_lag_s``,
    the packs that can already be cut from what was read are merged into one (up to
    ``pursuit_buffer_size_bytes``, or ``pursuit_buffer_time_s`` of merging) so a
    consumer catches up with fewer, bigger packs. Merging never waits for more input.

    Per channel, at most ``channel_buffer_size`` messages and ``channel_buffer_bytes``
    payload bytes wait in the barrier (plus about one message), besides the reader's own
    ``receive_buffer_size`` / ``receive_buffer_bytes``. A channel at its limit is not
    read until time moves on, unless time waits on it; so a channel that never ticks
    stops the others at their limits (logged as a warning once) instead of letting
    memory grow, and everything drains in order once it ticks.
    """

    def __init__(
        self,
        client: Client,
        *,
        late_policy: LatePolicy = "deliver",
        on_late: LateHandler | None = None,
        channel_buffer_size: int = 65536,
        channel_buffer_bytes: int = 8 * 1024 * 1024,
        pursuit_lag_s: float = 10.0,
        pursuit_buffer_size_bytes: int = 100 * 1024 * 1024,
        pursuit_buffer_time_s: float = 1.0,
        **kwargs: Unpack[StreamOptions],
    ) -> None:
        super().__init__(client, **kwargs)
        self._late_policy: LatePolicy = late_policy
        self._on_late = on_late
        check_buffer_sizes(
            channel_buffer_size=channel_buffer_size, channel_buffer_bytes=channel_buffer_bytes
        )
        self._channel_buffer_size = channel_buffer_size
        self._channel_buffer_bytes = channel_buffer_bytes
        self.pursuit_lag_s = pursuit_lag_s
        self.pursuit_buffer_size_bytes = pursuit_buffer_size_bytes
        self.pursuit_buffer_time_s = pursuit_buffer_time_s
        self._barrier: TickBarrier | None = None
        self.pursuit_merges = 0

    @property
    def barrier(self) -> TickBarrier:
        if self._barrier is None:
            raise StreamStateError("no consumer channels: call as_consumer() first")
        return self._barrier

    def _check_new_channels(self, channels: Sequence[str]) -> None:
        if self._barrier is not None:
            raise StreamStateError("a TtMsgStream subscribes to all of its channels at once")
        super()._check_new_channels(channels)

    def _subscribed(self, channels: Sequence[str]) -> None:
        self._barrier = self._new_barrier(list(channels))

    def _new_barrier(self, channels: list[str]) -> TickBarrier:
        return TickBarrier(
            channels,
            late_policy=self._late_policy,
            on_late=self._on_late,
            channel_capacity=self._channel_buffer_size,
            channel_byte_limit=self._channel_buffer_bytes,
        )

    async def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        """Resume every channel at once from ``positions`` (a pack's ``end_positions``).

        The barrier is rebuilt from the positions, so each consumed channel needs one.
        """
        self._check_open()
        if not include_current:
            raise InvalidPositionError(
                "a TtMsgStream resumes inclusively: an end position may be the first message "
                "not yet delivered, so include_current=False would skip it"
            )
        given = [p.channel for p in positions]
        missing = [c for c in self.consumer_channels if c not in given]
        if missing or len(set(given)) != len(given):
            raise InvalidPositionError(
                f"a TtMsgStream seeks all its channels at once, one position each: "
                f"missing {missing}, given {given}"
            )
        await super().seek(positions, include_current)

    def _after_seek(self, positions: Sequence[MsgPosition]) -> None:
        """Rebuild the barrier so it starts exactly where ``positions`` stand."""
        old = self.barrier
        self._barrier = self._new_barrier(old.channels)
        self._barrier.stats = old.stats
        self._barrier.resume_from(positions)

    def _cut_pack(self) -> MsgPack | None:
        """Feed buffered messages to the barrier until a pack is cut or nothing is left.

        Rows move in runs that end at a tick, and the barrier is asked for a pack after
        every tick, so identical ticks on every channel give one pack per tick however
        far the readers have read ahead.
        """
        barrier = self.barrier
        pack = barrier.pop()
        if pack is not None:
            return pack
        for reader in self._readers:
            buffer, channel = reader.buffer, reader.channel
            while buffer and barrier.wants(channel):
                rows, lo = buffer.head()
                taken, ticked = barrier.push_rows(channel, rows, lo)
                reader.advance(taken)
                if ticked:
                    pack = barrier.pop()
                    if pack is not None:
                        return pack
                elif not taken:
                    break
        return None

    async def _next_pack(self) -> MsgPack:
        while True:
            if self._closed or self._stopped:
                raise StopAsyncIteration
            pack = self._cut_pack()
            if pack is not None:
                return pack
            if any(r.buffer and self.barrier.wants(r.channel) for r in self._readers):
                continue
            self._raise_reader_errors()
            # Every buffered channel is held at its limit: time waits on channels with
            # nothing read yet.
            held = [r.channel for r in self._readers if r.buffer]
            if held:
                self.barrier.report_stall(held)
            self._arrived.clear()
            await self._arrived.wait()

    def _lag_s(self, pack: MsgPack) -> float:
        physical_ms, _ = parse_ts(pack.end_ts)
        return time.time() - physical_ms / 1000.0

    async def __anext__(self) -> MsgPack:
        self._require_consumers()
        pack = await self._next_pack()
        if self.pursuit_lag_s <= 0 or self._lag_s(pack) <= self.pursuit_lag_s:
            return pack
        merged = [pack]
        size = sum(m.size for m in pack.msgs)
        deadline = time.monotonic() + self.pursuit_buffer_time_s
        while size < self.pursuit_buffer_size_bytes and time.monotonic() < deadline:
            following = self._cut_pack()
            if following is None:
                break
            merged.append(following)
            size += sum(m.size for m in following.msgs)
        if len(merged) > 1:
            self.pursuit_merges += len(merged) - 1
        return merge_packs(merged)
