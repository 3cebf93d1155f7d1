"""Stalled channels: which channel of a time-tick stream holds the common tick back.

A pure state machine, fed each channel's last tick and the time (it owns no clock and
no task; :class:`~msgstream.streams.ttstream.TtMsgStream` feeds it on a timer). A channel
*advances* when its last tick changes. It is *stalled* when it holds the common tick
back (its last tick is the minimum, below the newest of the others, or it has none yet
while others have one), has not advanced for ``threshold_s``, and another channel has
advanced since it last did: time moves everywhere but there. Whole streams that go quiet
(no producer at all) are not stalls.

Each transition is logged once, as a warning naming the channel and how far behind it
is, and again when the channel advances; both go to the stream's probe, if any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..observability.logs import fields, get_logger
from ..observability.observe import TickProbe
from ..wire.tso import parse_ts

log = get_logger(__name__)

__all__ = ["ChannelTickState", "StallWatch"]


@dataclass(frozen=True, slots=True)
class ChannelTickState:
    """One channel of a time-tick stream, as :meth:`TtMsgStream.channel_states` shows it."""

    channel: str
    last_tick: int | None
    """The last time tick read on the channel (a hybrid timestamp), None before the first."""
    idle_s: float
    """Seconds since the channel last advanced (its last tick changed)."""
    stalled: bool
    """Whether it holds the common tick back while other channels advance (see
    :mod:`msgstream.timetick.stall`)."""
    behind_s: float | None
    """How far its last tick is behind the newest tick of any channel, in seconds of
    physical time (None while it has no tick, or no other channel has)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "channel": self.channel,
            "last_tick": self.last_tick,
            "idle_s": round(self.idle_s, 3),
            "stalled": self.stalled,
            "behind_s": None if self.behind_s is None else round(self.behind_s, 3),
        }


def _seconds(ts: int) -> float:
    return parse_ts(ts)[0] / 1000.0


class StallWatch:
    """Watches the channels of one stream; :meth:`observe` it with their last ticks."""

    def __init__(
        self,
        channels: Sequence[str],
        threshold_s: float,
        now: float,
        *,
        backend: str = "",
        subscription: str = "",
        probe: TickProbe | None = None,
    ) -> None:
        self.channels = list(channels)
        self.threshold_s = threshold_s
        self._backend = backend
        self._subscription = subscription
        self._probe = probe
        self._ticks: list[int | None] = [None] * len(self.channels)
        self._advanced: list[float] = [now] * len(self.channels)
        self._stalled: list[bool] = [False] * len(self.channels)
        self._now = now

    def reset(self, now: float) -> None:
        """Start over (a seek rebuilt the stream's state): every channel just advanced."""
        for index, stalled in enumerate(self._stalled):
            if stalled:
                self._recovered(index, now)
        self._ticks = [None] * len(self.channels)
        self._advanced = [now] * len(self.channels)
        self._now = now

    def observe(self, ticks: Sequence[int | None], now: float) -> None:
        """Feed each channel's last tick (in ``channels`` order) as of ``now``."""
        self._now = now
        for index, tick in enumerate(ticks):
            if tick != self._ticks[index]:
                self._ticks[index] = tick
                self._advanced[index] = now
                if self._stalled[index]:
                    self._recovered(index, now)
        known = [t for t in ticks if t is not None]
        if not known:
            return
        newest, lowest = max(known), min(known)
        if len(known) == len(ticks) and lowest == newest:
            return  # every channel at the same tick: nothing held back
        latest_advance = max(self._advanced)
        for index, tick in enumerate(ticks):
            if self._stalled[index]:
                continue
            holds_back = tick is None or (len(known) == len(ticks) and tick == lowest)
            if (
                holds_back
                and now - self._advanced[index] >= self.threshold_s
                and latest_advance > self._advanced[index]
            ):
                self._stall(index, now, newest)

    def _behind(self, index: int) -> float | None:
        tick = self._ticks[index]
        known = [t for t in self._ticks if t is not None]
        if tick is None or not known:
            return None
        return max(_seconds(max(known)) - _seconds(tick), 0.0)

    def _stall(self, index: int, now: float, newest: int) -> None:
        self._stalled[index] = True
        channel = self.channels[index]
        idle = now - self._advanced[index]
        behind = self._behind(index)
        log.warning(
            "channel %r holds the time tick back: it has not advanced for %.1fs while "
            "other channels did (%s)",
            channel,
            idle,
            "no time tick read on it yet"
            if behind is None
            else f"its last tick is {behind:.1f}s behind the newest",
            extra={
                **fields(self._backend, channel, self._subscription),
                "idle_s": idle,
                "behind_s": behind,
            },
        )
        if self._probe is not None:
            self._probe.stalled(channel, behind if behind is not None else idle)

    def _recovered(self, index: int, now: float) -> None:
        self._stalled[index] = False
        channel = self.channels[index]
        log.warning(
            "channel %r advances again: the time tick is no longer held back by it",
            channel,
            extra=fields(self._backend, channel, self._subscription),
        )
        if self._probe is not None:
            self._probe.stalled(channel, None)

    @property
    def stalled(self) -> list[str]:
        """The channels stalled now."""
        return [c for c, s in zip(self.channels, self._stalled, strict=True) if s]

    def states(self) -> list[ChannelTickState]:
        """Each channel's state as of the last :meth:`observe`."""
        return [
            ChannelTickState(
                channel,
                self._ticks[index],
                max(self._now - self._advanced[index], 0.0),
                self._stalled[index],
                self._behind(index),
            )
            for index, channel in enumerate(self.channels)
        ]
