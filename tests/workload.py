"""Producer scripts for time-tick tests: interleavings of data and ticks per channel."""

from __future__ import annotations

from dataclasses import dataclass

from msgstream import DeleteMsg, TimeTickMsg, TsMsg


@dataclass(frozen=True)
class Event:
    channel: int
    tick: bool
    ts: int
    msg_id: int


def to_message(event: Event) -> TsMsg:
    """A tick, or a one-key Delete standing for a data message, routed to its channel."""
    if event.tick:
        return TimeTickMsg(msg_id=event.msg_id, timestamp=event.ts, hash_keys=[event.channel])
    return DeleteMsg(
        msg_id=event.msg_id,
        timestamp=event.ts,
        collection_name="c",
        primary_keys=[event.msg_id],
        hash_keys=[event.channel],
    )


def regular_script(channels: int, ticks: int, per_tick: int, step: int = 10) -> list[Event]:
    """Every channel: ``per_tick`` data messages then a tick, ``ticks`` times; each
    channel's ticks are offset so tick values differ between channels. A closing tick
    on every channel lets every data message be emitted."""
    events: list[Event] = []
    msg_id = 0
    for t in range(1, ticks + 1):
        for c in range(channels):
            tick_ts = t * step + c
            for k in range(per_tick):
                msg_id += 1
                events.append(Event(c, False, tick_ts - per_tick + k, msg_id))
            msg_id += 1
            events.append(Event(c, True, tick_ts, msg_id))
    for c in range(channels):
        msg_id += 1
        events.append(Event(c, True, (ticks + 1) * step + channels, msg_id))
    return events
