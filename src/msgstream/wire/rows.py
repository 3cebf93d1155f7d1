"""Messages of one channel held column by column until they are delivered.

Readers validate what they receive in batches (:func:`msgstream.wire.codec.decode_batch`) and
keep the result as :class:`Rows`: per message its envelope, decode plan, payload,
MessageID bytes and barrier timestamp, in plain lists. The time-tick barrier moves rows,
not objects; a :class:`~msgstream.wire.messages.TsMsg` is built once, when its pack is cut
(or when a plain stream hands it out). Nothing but lists of ints, bytes and tuples waits
in the buffers, which keeps both the per-message work and the garbage collector's load
low.
"""

from __future__ import annotations

from collections import deque
from operator import itemgetter
from typing import Any

from .messages import TsMsg
from .plans import DmlPlan, Plan, ReadyPlan, kind_of
from .position import MsgPosition

_new_tuple = tuple.__new__


class Rows:
    """Rows of one channel in arrival order, one list per column.

    ``ts`` is what the barrier orders by (the message's ``end_ts``); ``msg_ids``,
    ``stamps`` (the header timestamps) and ``sources`` come from the envelopes. ``ids[i]``
    is the row's ``MessageID.to_bytes()``; for a message fed to the barrier as an object
    (:func:`message_rows`) it is that message's position (possibly None). ``group`` is
    the subscription name positions are made with.

    A reader's rows are read-only (their columns may share lists, see
    :class:`~msgstream.wire.codec.DecodedBatch`); the barrier's own rows are appended to and
    cut from the front.
    """

    __slots__ = (
        "channel",
        "group",
        "ids",
        "kinds",
        "msg_ids",
        "payloads",
        "plans",
        "sources",
        "stamps",
        "ts",
    )

    def __init__(self, channel: str, group: str = "") -> None:
        self.channel = channel
        self.group = group
        self.ts: list[int] = []
        self.kinds = bytearray()
        self.plans: list[Plan] = []
        self.msg_ids: list[int] = []
        self.stamps: list[int] = []
        self.sources: list[int] = []
        self.payloads: list[bytes] = []
        self.ids: list[Any] = []

    def __len__(self) -> int:
        return len(self.ts)

    def build(self, index: int) -> TsMsg:
        """The message of row ``index`` (built by its plan)."""
        return self.plans[index].build(
            self.msg_ids[index],
            self.stamps[index],
            self.sources[index],
            self.payloads[index],
            self.ids[index],
            (self.channel, self.group),
        )

    def build_range(self, lo: int, hi: int) -> list[TsMsg]:
        """The messages of rows ``lo:hi``."""
        cut = slice(lo, hi)
        return self._build_all(*(column[cut] for column in self._columns()))

    def build_at(self, indices: list[int]) -> list[TsMsg]:
        """The messages of the rows at ``indices`` (in that order)."""
        if len(indices) < 2:
            return [self.build(index) for index in indices]
        pick = itemgetter(*indices)
        return self._build_all(*(list(pick(column)) for column in self._columns()))

    def _columns(self) -> tuple[list[Any], ...]:
        return self.plans, self.msg_ids, self.stamps, self.sources, self.payloads, self.ids

    def _build_all(
        self,
        plans: list[Plan],
        msg_ids: list[int],
        stamps: list[int],
        sources: list[int],
        payloads: list[bytes],
        ids: list[Any],
    ) -> list[TsMsg]:
        """Messages from these rows' columns: one call when one DML plan built them all
        (the usual run of Inserts), else one message at a time."""
        where = (self.channel, self.group)
        first = plans[0] if plans else None
        if isinstance(first, DmlPlan) and plans.count(first) == len(plans):
            return first.build_many(msg_ids, stamps, sources, payloads, ids, where)
        return [
            plan.build(msg_id, stamp, source, payload, at, where)
            for plan, msg_id, stamp, source, payload, at in zip(
                plans, msg_ids, stamps, sources, payloads, ids, strict=True
            )
        ]

    def position(self, index: int) -> MsgPosition | None:
        """Where row ``index`` stands (its message's ``position``)."""
        where = self.ids[index]
        if type(where) is bytes:
            return _new_tuple(MsgPosition, (self.channel, where, self.group, self.stamps[index], 0))
        return where  # type: ignore[no-any-return]

    def extend(self, other: Rows, lo: int, hi: int) -> None:
        """Append rows ``lo:hi`` of ``other``."""
        self.ts += other.ts[lo:hi]
        self.kinds += other.kinds[lo:hi]
        self.plans += other.plans[lo:hi]
        self.msg_ids += other.msg_ids[lo:hi]
        self.stamps += other.stamps[lo:hi]
        self.sources += other.sources[lo:hi]
        self.payloads += other.payloads[lo:hi]
        self.ids += other.ids[lo:hi]

    def append_row(self, other: Rows, index: int, kind: int) -> None:
        """Append row ``index`` of ``other`` as a row of the given kind."""
        self.ts.append(other.ts[index])
        self.kinds.append(kind)
        self.plans.append(other.plans[index])
        self.msg_ids.append(other.msg_ids[index])
        self.stamps.append(other.stamps[index])
        self.sources.append(other.sources[index])
        self.payloads.append(other.payloads[index])
        self.ids.append(other.ids[index])

    def append_message(self, msg: TsMsg, ts: int, kind: int, where: Any) -> None:
        """Append a message that exists as an object already (delivered as is)."""
        self.ts.append(ts)
        self.kinds.append(kind)
        self.plans.append(ReadyPlan(msg))
        self.msg_ids.append(msg.msg_id)
        self.stamps.append(msg.timestamp)
        self.sources.append(msg.source_id)
        self.payloads.append(b"")
        self.ids.append(where)

    def drop_front(self, count: int) -> None:
        """Forget the first ``count`` rows."""
        del self.ts[:count]
        del self.kinds[:count]
        del self.plans[:count]
        del self.msg_ids[:count]
        del self.stamps[:count]
        del self.sources[:count]
        del self.payloads[:count]
        del self.ids[:count]


def message_rows(channel: str, msg: TsMsg) -> Rows:
    """One row holding ``msg`` as it is (its position kept)."""
    rows = Rows(channel)
    rows.append_message(msg, msg.end_ts, kind_of(msg.MSG_TYPE), msg.position)
    return rows


class RowQueue:
    """A reader's buffer: chunks of rows received, not yet taken. ``len()`` counts rows,
    :attr:`nbytes` the bytes of their payloads (what bounds a reader's memory)."""

    __slots__ = ("_chunks", "_count", "_lo", "nbytes")

    def __init__(self) -> None:
        self._chunks: deque[Rows] = deque()
        self._lo = 0
        self._count = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def append(self, rows: Rows) -> None:
        if len(rows):
            self._chunks.append(rows)
            self._count += len(rows)
            self.nbytes += sum(map(len, rows.payloads))

    def head(self) -> tuple[Rows, int]:
        """The oldest chunk and the index of its first row not yet taken."""
        return self._chunks[0], self._lo

    def advance(self, count: int) -> None:
        """Take ``count`` rows (at most the rest of the head chunk)."""
        head, lo = self._chunks[0], self._lo
        self._count -= count
        if lo == 0 and count >= len(head):
            self.nbytes -= sum(map(len, head.payloads))
        else:
            self.nbytes -= sum(map(len, head.payloads[lo : lo + count]))
        self._lo = lo + count
        if self._lo >= len(head):
            self._chunks.popleft()
            self._lo = 0

    def popleft(self) -> TsMsg:
        """Take the oldest row as a message."""
        rows = self._chunks[0]
        msg = rows.build(self._lo)
        self.advance(1)
        return msg

    def clear(self) -> None:
        self._chunks.clear()
        self._lo = 0
        self._count = 0
        self.nbytes = 0
