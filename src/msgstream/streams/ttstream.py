"""TtMsgStream: many channels merged into packs aligned on time ticks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Unpack

from ..configuration.config import STREAM_DEFAULTS, LatePolicy
from ..contract.backend import Client
from ..errors import InvalidPositionError, LateMessageError, StreamStateError
from ..observability.logs import fields, get_logger
from ..observability.observe import TickProbe
from ..runtime.scope import cancel_and_wait
from ..timetick.barrier import LateHandler, TickBarrier, merge_packs
from ..timetick.stall import ChannelTickState, StallWatch
from ..wire.messages import TsMsg
from ..wire.pack import MsgPack
from ..wire.position import MsgPosition
from ..wire.tso import parse_ts
from .stream import MsgStream, StreamOptions, check_buffer_sizes

log = get_logger(__name__)


class TtStreamOptions(StreamOptions, total=False):
    """The keyword options of :class:`TtMsgStream` (and of ``new_ttmsgstream``)."""

    late_policy: LatePolicy
    on_late: LateHandler | None
    channel_buffer_size: int
    channel_buffer_bytes: int
    pursuit_lag_s: float
    pursuit_buffer_size_bytes: int
    pursuit_buffer_time_s: float
    tick_interval_s: float
    stall_after_ticks: float


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

    Every channel's progress is watched (:mod:`msgstream.timetick.stall`): a channel that holds
    the common tick back for ``stall_after_ticks`` times the producers'
    ``tick_interval_s`` while other channels advance is logged once as stalled (and again
    when it advances), reported to the instruments and shown by :meth:`channel_states`.
    ``stall_after_ticks=0`` turns the watch off.
    """

    def __init__(
        self,
        client: Client,
        *,
        late_policy: LatePolicy = STREAM_DEFAULTS.late_policy,
        on_late: LateHandler | None = None,
        channel_buffer_size: int = STREAM_DEFAULTS.tt_channel_buffer_size,
        channel_buffer_bytes: int = STREAM_DEFAULTS.tt_channel_buffer_bytes,
        pursuit_lag_s: float = STREAM_DEFAULTS.pursuit_lag_s,
        pursuit_buffer_size_bytes: int = STREAM_DEFAULTS.pursuit_buffer_size_bytes,
        pursuit_buffer_time_s: float = STREAM_DEFAULTS.pursuit_buffer_time_s,
        tick_interval_s: float = STREAM_DEFAULTS.tick_interval_s,
        stall_after_ticks: float = STREAM_DEFAULTS.stall_after_ticks,
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
        if tick_interval_s <= 0:
            raise ValueError(f"tick_interval_s must be > 0, got {tick_interval_s}")
        if stall_after_ticks < 0:
            raise ValueError(f"stall_after_ticks must be >= 0, got {stall_after_ticks}")
        self._barrier: TickBarrier | None = None
        self.pursuit_merges = 0
        self.stall_threshold_s = tick_interval_s * stall_after_ticks
        """How long a channel may hold the common tick back before it counts as stalled
        (0: not watched)."""
        self._watch: StallWatch | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._watch_clock: Callable[[], float] = time.monotonic
        """The stall watch's clock: the event loop's (from ``as_consumer``), whose timer
        drives the watch, so a stall is measured on the clock that times the looking."""
        self._tick_probe: TickProbe | None = None

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
        backend, subname = self.client.backend_name, self._subname
        if self._instruments is not None:
            self._tick_probe = self._instruments.ticks(backend, subname)
        if self.stall_threshold_s > 0 or self._tick_probe is not None:
            loop = asyncio.get_running_loop()
            self._watch_clock = loop.time
            self._watch = StallWatch(
                channels,
                self.stall_threshold_s or float("inf"),
                self._watch_clock(),
                backend=backend,
                subscription=subname,
                probe=self._tick_probe,
            )
            self._watch_task = loop.create_task(
                self._watching(), name=f"msgstream-stall-watch-{subname}"
            )

    def _new_barrier(self, channels: list[str]) -> TickBarrier:
        observed = self._instruments is not None
        return TickBarrier(
            channels,
            late_policy=self._late_policy,
            on_late=self._late_observed if observed else self._on_late,
            channel_capacity=self._channel_buffer_size,
            channel_byte_limit=self._channel_buffer_bytes,
            backend=self.client.backend_name,
            subscription=self._subname,
        )

    def _late_observed(self, channel: str, msg: TsMsg, error: LateMessageError) -> None:
        """Count a late message on its channel's probe, then call the user's ``on_late``."""
        probe = self._reader(channel).probe
        if probe is not None:
            probe.late(self._late_policy)
        if self._on_late is not None:
            self._on_late(channel, msg, error)

    # --- watching the channels ---------------------------------------------------------
    @property
    def _watch_period_s(self) -> float:
        """How often the channels' progress is looked at: a quarter of the stall threshold
        (so a stall is reported within 1.25 thresholds), at most every second."""
        if self.stall_threshold_s <= 0:
            return 1.0
        return min(max(self.stall_threshold_s / 4, 0.01), 1.0)

    async def _watching(self) -> None:
        """The stall watch's timer: looks at the barrier every period, never busy."""
        failed = False
        while True:
            await asyncio.sleep(self._watch_period_s)
            try:
                self._look()
            except Exception:  # the watch only reports; it must not cost the stream
                if not failed:
                    log.exception(
                        "watching the channels failed", extra=fields(self.client.backend_name)
                    )
                failed = True

    def _look(self) -> None:
        watch, barrier = self._watch, self._barrier
        if watch is None or barrier is None:
            return
        ticks = barrier.last_ticks()
        watch.observe(ticks, self._watch_clock())
        probe = self._tick_probe
        if probe is not None:
            for reader, tick in zip(self._readers, ticks, strict=True):
                buffered = len(reader.buffer) + barrier.pending(reader.channel)
                probe.channel(
                    reader.channel, None if tick is None else parse_ts(tick)[0] / 1000, buffered
                )

    def channel_states(self) -> list[ChannelTickState]:
        """Each consumed channel's progress: its last tick, how long since it advanced,
        whether it is stalled and how far behind the newest tick it is (as of the last
        look, at most a quarter of the stall threshold ago)."""
        if self._watch is None:
            raise StreamStateError(
                "channels are not watched: as_consumer() first, with stall_after_ticks > 0"
            )
        self._look()
        return self._watch.states()

    @property
    def stalled_channels(self) -> list[str]:
        """The channels holding the common tick back right now (see :meth:`channel_states`)."""
        return [] if self._watch is None else self._watch.stalled

    async def close(self) -> None:
        task, self._watch_task = self._watch_task, None
        await cancel_and_wait(task)
        await super().close()

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
        if self._watch is not None:
            self._watch.reset(self._watch_clock())

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
            if self._read_to_stops():
                # Bounded and read to the stops: what is still buffered lies above the
                # last tick every channel reached, so no pack can be cut from it.
                raise StopAsyncIteration
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

    def batches(self, max_messages: int = 256) -> AsyncIterator[MsgPack]:
        """Refused: a time-tick stream's packs are cut at its ticks, whatever their size
        (``async for pack in stream``)."""
        raise StreamStateError(
            "a TtMsgStream hands out packs cut at time ticks, not batches of a size: "
            "iterate the stream itself (async for pack in stream)"
        )

    async def __anext__(self) -> MsgPack:
        pack = await self._next_pursued()
        if self._tick_probe is not None:
            self._tick_probe.pack(len(pack.msgs), self._lag_s(pack))
        if self._packs_probe is not None:
            self._packs_probe.consumed(pack)
        return pack

    async def _next_pursued(self) -> MsgPack:
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
            if self._tick_probe is not None:
                self._tick_probe.merged(len(merged) - 1)
        return merge_packs(merged)
