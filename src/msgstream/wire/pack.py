"""MsgPack: what a stream yields and what ``produce`` takes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .messages import TsMsg
from .position import MsgPosition


@dataclass(slots=True)
class MsgPack:
    """A batch of messages with the time range and positions it covers.

    For a TtMsgStream pack, every message has ``begin_ts < msg.end_ts <= end_ts``, except
    late messages delivered under ``late_policy="deliver"`` (counted and logged);
    ``end_positions`` are where a new stream must seek to continue right after this pack
    (exactly once). ``ack_positions`` are, per channel, the last message such that it and
    everything before it in the channel is done: ``stream.ack(pack)`` acknowledges them,
    so a subscription reopened later loses nothing (it may see again what follows them).
    """

    msgs: list[TsMsg] = field(default_factory=list)
    begin_ts: int = 0
    end_ts: int = 0
    start_positions: list[MsgPosition] = field(default_factory=list)
    end_positions: list[MsgPosition] = field(default_factory=list)
    ack_positions: list[MsgPosition] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.msgs)

    def __iter__(self) -> Iterator[TsMsg]:
        return iter(self.msgs)

    @classmethod
    def of(cls, *msgs: TsMsg) -> MsgPack:
        """A pack to produce, its time range taken from the messages."""
        listed = list(msgs)
        begin = min((m.begin_ts for m in listed), default=0)
        end = max((m.end_ts for m in listed), default=0)
        return cls(msgs=listed, begin_ts=begin, end_ts=end)
