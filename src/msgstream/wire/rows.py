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
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from . import envelope
from .messages import TsMsg
from .plans import KIND_DML, DmlPlan, Plan, ReadyPlan, kind_of
from .position import MsgPosition

if TYPE_CHECKING:
    from .codec import DecodedBatch

_new_tuple = tuple.__new__
_BEGIN_AT = envelope.offset("begin_ts")
_BEGIN_TS = envelope.fields_struct("begin_ts", "begin_ts")


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
        """Messages from these rows' columns: one call for each run of rows a DML plan
        builds (the usual run of Inserts between two ticks), else one message at a time."""
        where = (self.channel, self.group)
        first = plans[0] if plans else None
        if isinstance(first, DmlPlan) and plans.count(first) == len(plans):
            return first.build_many(msg_ids, stamps, sources, payloads, ids, where)
        out: list[TsMsg] = []
        lo = 0
        for plan, run in groupby(plans):
            hi = lo + len(list(run))
            if isinstance(plan, DmlPlan) and hi - lo > 1:
                cut = slice(lo, hi)
                out += plan.build_many(
                    msg_ids[cut], stamps[cut], sources[cut], payloads[cut], ids[cut], where
                )
            else:
                out += [
                    plan.build(msg_ids[i], stamps[i], sources[i], payloads[i], ids[i], where)
                    for i in range(lo, hi)
                ]
            lo = hi
        return out

    def time_span(self, lo: int, hi: int) -> tuple[int, int]:
        """The least ``begin_ts`` and the greatest ``end_ts`` of the messages of rows
        ``lo:hi`` (at least one), as the decoder gives them, without asking a message.

        A row's ``ts`` is its message's ``end_ts`` (the timestamp for types other than
        Insert and Delete); its ``begin_ts`` is the same unless its message has rows
        stamped apart, whose range only its envelope holds (checked by the decoder
        against the rows): only plans of other than one row are looked up there."""
        ts = self.ts[lo:hi]
        begin_ts = min(ts)
        for plan in set(self.plans[lo:hi]):
            if plan.kind == KIND_DML and plan.stamp_rows != 1:
                rows = zip(self.plans[lo:hi], self.payloads[lo:hi], strict=True)
                begins = (_BEGIN_TS.unpack_from(p, _BEGIN_AT)[0] for q, p in rows if q is plan)
                begin_ts = min(begin_ts, *begins)
        return begin_ts, max(ts)

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


def decoded_rows(
    channel: str, group: str, decoded: DecodedBatch, payloads: list[bytes], ids: list[bytes]
) -> Rows:
    """The rows of a validated batch of ``channel``, read for subscription ``group``:
    ``decoded`` is :func:`~msgstream.wire.codec.decode_batch`'s result, ``payloads`` and
    ``ids`` (each message's ``MessageID.to_bytes()``) those of its good rows. A message
    the decoder built in full already gets its position here."""
    rows = Rows(channel, group)
    rows.ts = decoded.ts
    rows.kinds = decoded.kinds
    rows.plans = decoded.plans
    rows.msg_ids = decoded.msg_ids
    rows.stamps = decoded.stamps
    rows.sources = decoded.sources
    rows.payloads = payloads
    rows.ids = ids
    for index in decoded.ready:
        plan = rows.plans[index]
        assert isinstance(plan, ReadyPlan)
        plan.msg.position = MsgPosition(channel, ids[index], group, plan.msg.timestamp)
    return rows


def message_rows(channel: str, msg: TsMsg) -> Rows:
    """One row holding ``msg`` as it is (its position kept)."""
    rows = Rows(channel)
    rows.append_message(msg, msg.end_ts, kind_of(msg.MSG_TYPE), msg.position)
    return rows


class RowQueue:
    """A reader's buffer: chunks of rows received, not yet taken. ``len()`` counts rows,
    :attr:`nbytes` the bytes of their payloads (what bounds a reader's memory).

    :meth:`popleft` builds the messages of up to :data:`RUN` rows of the head chunk at
    once (one plan call for a run, not one per message) and hands them out one at a
    time; a row leaves the buffer, and its bytes the count, when its message is taken.
    """

    __slots__ = ("_built", "_chunks", "_count", "_lo", "nbytes")

    def __init__(self) -> None:
        self._chunks: deque[Rows] = deque()
        self._built: deque[TsMsg] = deque()
        """Messages of the head chunk's first rows, built ahead by :meth:`popleft`."""
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
        built = self._built
        if built:  # their messages, built ahead, are not handed out
            if count >= len(built):
                built.clear()
            else:
                for _ in range(count):
                    built.popleft()
        self._take(count)

    def _take(self, count: int) -> None:
        head, lo = self._chunks[0], self._lo
        self._count -= count
        if count == 1:
            self.nbytes -= len(head.payloads[lo])
        elif lo == 0 and count >= len(head):
            self.nbytes -= sum(map(len, head.payloads))
        else:
            self.nbytes -= sum(map(len, head.payloads[lo : lo + count]))
        self._lo = lo + count
        if self._lo >= len(head):
            self._chunks.popleft()
            self._lo = 0

    def take(self, limit: int) -> tuple[list[TsMsg], int, int]:
        """Take up to ``limit`` of the oldest rows (at least one, at most the rest of the
        head chunk) as messages, with their least ``begin_ts`` and greatest ``end_ts``."""
        rows, lo = self._chunks[0], self._lo
        built = self._built
        if built:  # built ahead by popleft: those first
            msgs = [built.popleft() for _ in range(min(limit, len(built)))]
        else:
            msgs = rows.build_range(lo, min(len(rows), lo + limit))
        begin_ts, end_ts = rows.time_span(lo, lo + len(msgs))
        self._take(len(msgs))
        return msgs, begin_ts, end_ts

    def popleft(self) -> TsMsg:
        """Take the oldest row as a message."""
        built = self._built
        if not built:
            rows, lo = self._chunks[0], self._lo
            built.extend(rows.build_range(lo, min(len(rows), lo + RUN)))
        msg = built.popleft()
        self._take(1)
        return msg

    def clear(self) -> None:
        self._chunks.clear()
        self._built.clear()
        self._lo = 0
        self._count = 0
        self.nbytes = 0


RUN = 32
"""How many rows :meth:`RowQueue.popleft` builds at once: enough that a plan call per run
costs little a message, few enough that what a seek or close throws away is little."""
