"""The wire format: a fixed binary envelope, an orjson body and raw side buffers.

Layout (little-endian; the envelope's fields are declared in :mod:`msgstream.wire.envelope`)::

    magic "MS" | version u8 | flags u8 | msg_type u16 | msg_id i64 | timestamp u64 |
    source_id i64 | begin_ts u64 | end_ts u64 | json_len u32 | crc32 u32 |
    json body | side buffers

``begin_ts``/``end_ts`` (for Insert and Delete the min/max of their row timestamps) ride
in the envelope, as in the original's message header, so the time-tick barrier orders
messages without touching their bodies.

``crc32`` covers the envelope fields before it and everything after the envelope, so a
flipped bit in a header field or a vector column is caught, not delivered. Decoding is
strict: any inconsistency raises :class:`DecodeError`.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import attrgetter, getitem, itemgetter
from typing import Any, cast

import numpy as np
import orjson

from ..configuration.limits import DEFAULT_MAX_MESSAGE_BYTES as DEFAULT_MAX_MESSAGE_BYTES
from ..errors import CodecError, DecodeError, UnknownMessageTypeError, UnknownTypeCodeError
from . import bodies, envelope
from .buffers import BodyReader, BodyWriter
from .checksum import crc32
from .joined import Joined
from .messages import BUILTIN_TYPES, USER_TYPE_MIN, DmlMsg, Header, TsMsg
from .packed import PackedValues
from .plans import Plan, ReadyPlan, UncheckedDmlPlan, plan_for
from .schema import CollectionSchema, FieldData

MAGIC = b"MS"
VERSION = 3
"""Written by :func:`encode`. Version 3 sends varchar, JSON and binary columns packed
(offsets plus one buffer); version 2 wrote their values inline in the JSON body."""
FLAGS = 0
"""The envelope's flags as written: no flag is defined yet."""
READABLE_VERSIONS = (2, 3)
"""Versions :func:`decode` reads: version 2 payloads (older writers) still decode; a
version 2 reader refuses version 3 with "unsupported codec version 3"."""
ENVELOPE_SIZE = envelope.SIZE
_ENVELOPE = envelope.STRUCT
_COVERED = envelope.COVERED
(_MAGIC, _VERSION, _MSG_TYPE, _MSG_ID, _TIMESTAMP, _SOURCE_ID, _BEGIN_TS, _END_TS) = map(
    envelope.index,
    ("magic", "version", "msg_type", "msg_id", "timestamp", "source_id", "begin_ts", "end_ts"),
)
_JSON_LEN, _CRC = envelope.index("json_len"), envelope.index("crc")
"""Positions of the fields in an unpacked envelope."""
_PACK_CRC = envelope.fields_struct("crc", "crc").pack
_header_of = itemgetter(_MSG_TYPE, _MSG_ID, _TIMESTAMP, _SOURCE_ID)
_time_range_of = itemgetter(_MSG_TYPE, _BEGIN_TS, _END_TS)
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


PLAN_CACHE_SIZE = 4096
"""Decode plans a registry keeps (keyed by type and body bytes); the cache starts over
when full."""


class MessageRegistry:
    """Maps message type codes to classes.

    It also caches the decode plans of the bodies it has seen (:mod:`msgstream.wire.plans`);
    changing the registry drops them.
    """

    def __init__(self, types: tuple[type[TsMsg], ...] = ()) -> None:
        self._by_code: dict[int, type[TsMsg]] = {}
        self.plans: dict[tuple[int, bytes], Plan] = {}
        self._unchecked: dict[tuple[int, int], UncheckedDmlPlan | None] = {}
        for cls in types:
            self._add(cls)

    def _add(self, cls: type[TsMsg]) -> None:
        self._by_code[cls.MSG_TYPE] = cls
        self._forget_plans()

    def _forget_plans(self) -> None:
        self.plans.clear()
        self._unchecked.clear()

    def unchecked_plan(self, code: int, max_bytes: int) -> UncheckedDmlPlan | None:
        """The plan of every unchecked payload of type ``code`` read under ``max_bytes``
        (one for all, so runs of them are built in one call); None unless ``code`` is
        Insert's or Delete's."""
        key = (code, max_bytes)
        if key not in self._unchecked:
            cls = self._by_code.get(code)
            full = partial(decode, registry=self, max_bytes=max_bytes)
            self._unchecked[key] = None if cls is None else UncheckedDmlPlan.of(cls, full)
        return self._unchecked[key]

    def register(self, cls: type[TsMsg]) -> type[TsMsg]:
        """Register a user message type (usable as a class decorator)."""
        code = cls.__dict__.get("MSG_TYPE")
        if not isinstance(code, int) or not USER_TYPE_MIN <= code <= 0xFFFF:
            raise ValueError(
                f"{cls.__name__}.MSG_TYPE must be an int in [{USER_TYPE_MIN}, 65535], got {code!r}"
            )
        existing = self._by_code.get(code)
        if existing is not None and existing is not cls:
            raise ValueError(
                f"message type code {code} is already registered to {existing.__name__}"
            )
        self._add(cls)
        return cls

    def unregister(self, cls: type[TsMsg]) -> None:
        if self._by_code.get(cls.MSG_TYPE) is cls:
            del self._by_code[cls.MSG_TYPE]
            self._forget_plans()

    def lookup(self, code: int) -> type[TsMsg] | None:
        return self._by_code.get(code)

    def knows(self, cls: type[TsMsg]) -> bool:
        return self._by_code.get(cls.MSG_TYPE) is cls


default_registry = MessageRegistry(BUILTIN_TYPES)


def register_message_type(cls: type[TsMsg]) -> type[TsMsg]:
    """Register a user message type in the default registry."""
    return default_registry.register(cls)


def encode(msg: TsMsg, registry: MessageRegistry = default_registry) -> bytes:
    """Serialise ``msg``; raise ``UnknownMessageTypeError`` for unregistered types."""
    if not registry.knows(type(msg)):
        raise UnknownMessageTypeError(
            type(msg).__name__, "not registered; call register_message_type"
        )
    writer = BodyWriter()
    try:
        body = orjson.dumps(msg.encode_body(writer), option=_JSON_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise CodecError(f"{_where(msg)}: body is not JSON-serialisable: {exc}") from exc
    except (AttributeError, TypeError) as exc:  # a field holds an object of the wrong kind
        raise CodecError(
            f"{_where(msg)}: body cannot be encoded: {type(exc).__name__}: {exc}"
        ) from exc
    chunks = writer.chunks()
    begin_ts, end_ts = msg.time_range()
    try:
        prefix = envelope_prefix(msg, begin_ts, end_ts, len(body))
    except struct.error as exc:
        raise CodecError(
            f"{_where(msg)}: header out of range (msg_id must fit int64, timestamp uint64, "
            f"source_id int64; timestamp={msg.timestamp!r}, source_id={msg.source_id!r}): "
            f"{exc}"
        ) from exc
    data = sealed(prefix, (body, *chunks))
    msg.size = len(data)
    return data


def envelope_prefix(msg: TsMsg, begin_ts: int, end_ts: int, body_len: int) -> bytes:
    """``msg``'s envelope up to its checksum, in :data:`msgstream.wire.envelope.FIELDS`
    order (``struct.error`` for a field out of range)."""
    return _COVERED.pack(
        MAGIC,
        VERSION,
        FLAGS,
        msg.MSG_TYPE,
        msg.msg_id,
        msg.timestamp,
        msg.source_id,
        begin_ts,
        end_ts,
        body_len,
    )


def sealed(prefix: bytes, tail: Sequence[bytes | memoryview]) -> bytes:
    """A payload: the envelope's ``prefix``, the checksum over it and the pieces of
    ``tail`` (body, then buffers), then those pieces, joined once."""
    crc = crc32(prefix)
    for piece in tail:
        crc = crc32(piece, crc)
    return b"".join((prefix, _PACK_CRC(crc), *tail))


def sealed_each(prefixes: Sequence[bytes], tails: Sequence[bytes]) -> list[bytes]:
    """:func:`sealed` for many payloads at once, each of one piece of tail (body, then
    buffers, joined): the checksums and joins run in C-level maps, not a Python loop a
    payload."""
    crcs = map(crc32, tails, map(crc32, prefixes))
    return list(map(b"".join, zip(prefixes, map(_PACK_CRC, crcs), tails, strict=True)))


def fill_envelopes(
    records: Any,
    msg_type: int,
    msg_ids: Any,
    timestamps: Any,
    source_ids: Any,
    begins: Any,
    ends: Any,
    body_lens: Any,
) -> None:
    """Write :func:`envelope_prefix` of many messages of type ``msg_type``, whose bodies
    are ``body_lens`` bytes long, into the envelope fields of ``records``: a numpy record
    array whose first fields are :data:`msgstream.wire.envelope.DTYPE`'s, a record a
    message. The other arguments give a field's value for each message (arrays) or one
    for all; a value out of its field's range raises ``OverflowError``."""
    for name, value in (
        ("magic", MAGIC), ("version", VERSION), ("flags", FLAGS), ("msg_type", msg_type),
        ("msg_id", msg_ids), ("timestamp", timestamps), ("source_id", source_ids),
        ("begin_ts", begins), ("end_ts", ends), ("json_len", body_lens),
    ):  # fmt: skip
        records[name] = value


def sealed_records(records: Any) -> list[bytes]:
    """:func:`sealed` for many payloads of one size at once: ``records`` (see
    :func:`fill_envelopes`) hold each payload whole but for its checksum, which is
    computed and written here. Each payload is made straight from its record (a raw
    bytes item's ``tolist``), with no copy of the whole."""
    count = len(records)
    raw = byte_rows(records)
    covered = np.concatenate((raw[:, : envelope.CRC_OFFSET], raw[:, ENVELOPE_SIZE:]), axis=1)
    sums = map(crc32, each_row(covered))
    records["crc"] = np.fromiter(sums, np.uint32, count)
    return each_row(raw)


def byte_rows(items: Any) -> Any:
    """A one-dimensional array's items as the rows of a 2-D byte array (no copy)."""
    return items.view(np.uint8).reshape(len(items), -1)


def each_row(rows: Any) -> list[bytes]:
    """Each row of the 2-D byte array ``rows`` as a bytes object, made in one C call."""
    count, size = rows.shape
    found: list[bytes] = rows.view((np.void, size)).reshape(count).tolist()
    return found


def _where(msg: TsMsg) -> str:
    return f"{type(msg).__name__}(msg_id={msg.msg_id!r})"


def _unpack_envelope(data: bytes) -> tuple[Any, ...]:
    """The envelope's fields (see :mod:`msgstream.wire.envelope`), its magic and version
    checked."""
    if len(data) < ENVELOPE_SIZE:
        raise DecodeError(f"payload of {len(data)} bytes is shorter than the envelope")
    head = _ENVELOPE.unpack_from(data)
    if head[_MAGIC] != MAGIC:
        raise DecodeError(f"bad magic {head[_MAGIC]!r} (not a msgstream payload)")
    if head[_VERSION] not in READABLE_VERSIONS:
        raise DecodeError(f"unsupported codec version {head[_VERSION]}")
    return head


def intact_envelope(
    data: bytes, *, checksum_verified: bool = False
) -> tuple[tuple[Any, ...], int] | None:
    """The envelope's fields and where the JSON body ends, if ``data`` is an intact payload
    (magic, a readable version, its announced length, its checksum unless a reader
    verified it already); None otherwise. The non-raising check for readers with a fast
    path of their own (the Spark bridge), which send everything else through
    :func:`decode` for its error."""
    if len(data) < ENVELOPE_SIZE:
        return None
    head = _ENVELOPE.unpack_from(data)
    body_end = ENVELOPE_SIZE + head[_JSON_LEN]
    if (
        head[_MAGIC] != MAGIC
        or head[_VERSION] not in READABLE_VERSIONS
        or body_end > len(data)
        or not (checksum_verified or _checksum_holds(memoryview(data), head))
    ):
        return None
    return head, body_end


def _checksum_holds(view: memoryview, head: tuple[Any, ...]) -> bool:
    """The envelope's crc32 covers the fields before it and everything after the envelope."""
    crc = crc32(view[ENVELOPE_SIZE:], crc32(view[: envelope.CRC_OFFSET]))
    return bool(crc == head[_CRC])


def peek_header(data: bytes) -> tuple[int, int, int, int]:
    """``(msg_type, msg_id, timestamp, source_id)`` without decoding the body."""
    found: tuple[int, int, int, int] = _header_of(_unpack_envelope(data))
    return found


def peek_time_range(data: bytes) -> tuple[int, int, int]:
    """``(msg_type, begin_ts, end_ts)`` without decoding the body: the time range the
    time-tick barrier orders a message by (for Insert and Delete the min/max of their row
    timestamps, else the timestamp twice)."""
    found: tuple[int, int, int] = _time_range_of(_unpack_envelope(data))
    return found


_ENVELOPE_PART = slice(0, ENVELOPE_SIZE)
_part = cast(Callable[[bytes, slice], bytes], getitem)
"""``payload[a:b]``, for C-level maps."""


def peek_envelopes(payloads: Sequence[bytes]) -> Any | None:
    """Every payload's envelope as one numpy record array (:data:`msgstream.wire.envelope.DTYPE`,
    a row per payload, fields by name), when each passes the checks of
    :func:`peek_time_range` (long enough, magic, a readable version); None when any does
    not -- ask those one by one for their error. Makes no Python object per payload."""
    count = len(payloads)
    if not count:
        return np.zeros(0, envelope.DTYPE)
    if min(map(len, payloads)) < ENVELOPE_SIZE:
        return None
    env = np.frombuffer(b"".join(map(_part, payloads, repeat(_ENVELOPE_PART))), envelope.DTYPE)
    return env if _readable(env) else None


def decode(
    data: bytes,
    registry: MessageRegistry = default_registry,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> TsMsg:
    """Parse a payload; raise ``DecodeError`` if it is not one (an unregistered type code
    raises its subclass ``UnknownTypeCodeError``, an ``UnknownMessageTypeError`` too)."""
    return _decode(data, registry, max_bytes)[0]


def _decode(data: bytes, registry: MessageRegistry, max_bytes: int) -> tuple[TsMsg, Any, int]:
    """The message, its parsed JSON body and where its side buffers start."""
    size = len(data)
    if size > max_bytes:
        raise DecodeError(f"payload of {size} bytes exceeds the limit of {max_bytes}")
    head = _unpack_envelope(data)
    msg_type, msg_id, ts, source = _header_of(head)
    json_len = head[_JSON_LEN]
    body_end = ENVELOPE_SIZE + json_len
    if body_end > size:
        raise DecodeError(
            f"body of {json_len} bytes announced, {size - ENVELOPE_SIZE} present (truncated)"
        )
    view = memoryview(data)
    if not _checksum_holds(view, head):
        raise DecodeError("checksum mismatch (corrupt or truncated payload)")
    cls = registry.lookup(msg_type)
    if cls is None:
        raise UnknownTypeCodeError(msg_type, f"msg_id={msg_id}")
    try:
        body = orjson.loads(view[ENVELOPE_SIZE:body_end])
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"{cls.__name__} body is not valid JSON: {exc}") from None
    header = Header(msg_id=msg_id, timestamp=ts, source_id=source)
    reader = BodyReader(data, body_end, cls.__name__)
    try:
        msg = cls.decode_body(header, body, reader)
    except DecodeError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise DecodeError(f"{cls.__name__} body is malformed: {exc!r}") from None
    if isinstance(msg, DmlMsg):
        begin_ts, end_ts = head[_BEGIN_TS], head[_END_TS]
        _check_ts_range(msg, begin_ts, end_ts)
        msg.adopt_ts_range(begin_ts, end_ts)
    msg.size = size
    return msg, body, body_end


def _check_ts_range(msg: DmlMsg, begin_ts: int, end_ts: int) -> None:
    """The envelope's time range must be the rows' (the barrier orders by the envelope,
    re-encoding writes the rows): a payload whose two disagree is corrupt."""
    stamps = msg.timestamps
    rows = len(stamps)
    if rows == 1:
        low = high = int(stamps[0])
    elif rows:
        low, high = int(stamps.min()), int(stamps.max())
    else:
        low = high = msg.timestamp
    if (low, high) != (begin_ts, end_ts):
        raise DecodeError(
            f"{type(msg).__name__}(msg_id={msg.msg_id}): the envelope's time range "
            f"[{begin_ts}, {end_ts}] is not its rows' [{low}, {high}]"
        )


# --- many payloads at once ------------------------------------------------------------------


@dataclass(slots=True)
class DecodedBatch:
    """Payloads of one read, validated and planned, column by column (good rows only).

    ``ts`` is what the time-tick barrier orders by (the message's ``end_ts``); ``kinds``
    its row kind (:mod:`msgstream.wire.plans`); ``msg_ids``, ``stamps`` and ``sources`` the
    envelopes' msg_id, timestamp and source_id. ``bad`` lists ``(index, error)`` of the
    payloads that failed, in input order; they have no row. ``ready`` lists the rows
    decoded in full already (their plan is a :class:`~msgstream.wire.plans.ReadyPlan`).
    The columns are read-only (``ts`` may be the very list ``stamps`` is).
    """

    plans: list[Plan] = field(default_factory=list)
    ts: list[int] = field(default_factory=list)
    kinds: bytearray = field(default_factory=bytearray)
    msg_ids: list[int] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    bad: list[tuple[int, CodecError]] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)


class _NoPlan(Plan):
    __slots__ = ()


_NO_PLAN = _NoPlan(-1, 1 << 62)
_HEAD = slice(0, envelope.CRC_OFFSET)
_TAIL = slice(ENVELOPE_SIZE, None)
_need = attrgetter("need")
_kind = attrgetter("kind")
_ts_field = attrgetter("ts_field")
_STAMP = bodies.ROW_TIMESTAMPS.item_type
_BYTES_ONLY = {bytes}
_COPY_LIMIT = 4096
"""Payload size up to which the checksummed part is sliced (copied) rather than viewed."""


COLUMN_WISE_FROM = 32
"""A good ``column_wise_from`` for :func:`decode_batch` where batches vary in size: the
column-wise checks cost a few dozen numpy calls per batch whatever its size, which a
smaller batch spends sooner message by message (a reader's first reads are small:
:data:`msgstream.streams.reader.FIRST_READ`)."""


def decode_batch(
    payloads: Sequence[bytes],
    registry: MessageRegistry = default_registry,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    unchecked: frozenset[int] = frozenset(),
    column_wise_from: int = 1,
) -> DecodedBatch:
    """Validate payloads as :func:`decode` does, without building messages yet.

    Every payload gets exactly :func:`decode`'s checks and errors; a good one becomes a
    row whose plan builds the message :func:`decode` would return. In a batch of at
    least ``column_wise_from`` payloads, those whose body was seen before (a cached
    plan) are checked column-wise, one C-level pass per check over the whole batch;
    otherwise a payload with a cached plan has the same checks one by one. The first of
    each body, and every payload of a batch where anything is off, is decoded in full.

    Except for the Insert and Delete type codes in ``unchecked``: a payload of those
    without a cached plan, with the current codec version, an intact envelope and a
    good checksum gets its type's :class:`~msgstream.wire.plans.UncheckedDmlPlan`: its body is
    not parsed here, and is decoded (and can fail) when its message's body is first read.
    """
    if len(payloads) >= column_wise_from:
        batch = _decode_known(payloads, registry, max_bytes, unchecked)
        if batch is not None:
            return batch
    return _decode_each(payloads, registry, max_bytes, unchecked)


def _decode_known(
    payloads: Sequence[bytes],
    registry: MessageRegistry,
    max_bytes: int,
    unchecked: frozenset[int] = frozenset(),
) -> DecodedBatch | None:
    """The batch when every payload is sound and has a cached plan (or, of a type in
    ``unchecked``, gets the unchecked plan), else None.

    The payloads are joined once (:class:`~msgstream.wire.joined.Joined`); envelopes, bodies
    and row timestamps are gathered from that by numpy indexing and checked per plan, so
    checking a batch makes no Python object per message beyond its columns' ints, and
    calls no Python code per message but the checksum's.
    """
    count = len(payloads)
    if not count:
        return DecodedBatch()
    if set(map(type, payloads)) != _BYTES_ONLY:  # plans are keyed by (hashable) bytes
        return None
    sizes = np.fromiter(map(len, payloads), np.int64, count)
    if sizes.max() > max_bytes or sizes.min() < ENVELOPE_SIZE:
        return None
    joined = Joined(payloads, sizes)
    env = joined.envelopes()
    if not _readable(env):
        return None
    if not _all(env["json_len"] + np.int64(ENVELOPE_SIZE) <= sizes):
        return None
    # Plans first: a batch with a payload that has none (a new body) goes message by
    # message anyway, and would otherwise have its checksums computed twice.
    found, rows = _plan_rows(joined, env, registry)
    if unchecked and not _unchecked_plans(found, env, rows, registry, max_bytes, unchecked):
        return None
    if not _all(np.fromiter(map(_need, found), np.int64, len(found))[rows] <= sizes):
        return None  # a payload without a plan (_NO_PLAN needs more than any payload has)
    prefixes = map(_part, payloads, repeat(_HEAD))
    # Small payloads: slicing copies less than a memoryview costs; large ones: no copy.
    sliceable: Iterable[Any] = payloads if sizes.max() <= _COPY_LIMIT else map(memoryview, payloads)
    tails: Iterable[Any] = map(getitem, sliceable, repeat(_TAIL))
    crcs = np.fromiter(map(crc32, tails, map(crc32, prefixes)), np.uint32, count)
    if not _all(crcs == env["crc"]):
        return None
    if not _ts_ranges_agree(joined, found, rows, env):
        return None
    # The barrier orders DML by end_ts, the rest by timestamp. Most often (single-row
    # DML, ticks) they are equal and both columns are one list (never modified).
    end_ts, timestamp = env["end_ts"], env["timestamp"]
    stamps = timestamp.tolist()
    ts = stamps
    if not _all(end_ts == timestamp):
        by_end = np.fromiter(map(_ts_field, found), np.int64, len(found))[rows] == _END_TS
        ts = np.where(by_end, end_ts, timestamp).tolist()
    kinds = bytearray(np.fromiter(map(_kind, found), np.uint8, len(found))[rows])
    plans = _objects(found)[rows].tolist()
    return DecodedBatch(plans, ts, kinds, env["msg_id"].tolist(), stamps, env["source_id"].tolist())


_READABLE = np.zeros(256, bool)
_READABLE[list(READABLE_VERSIONS)] = True


def _all(checks: Any) -> bool:
    """Whether every element of the boolean array ``checks`` holds: one C call (the
    array method ``all`` goes through Python, which counts at a few calls per batch)."""
    return not np.count_nonzero(~checks)


def _readable(env: Any) -> bool:
    """Whether every envelope has the magic and a readable version."""
    return _all(env["magic"] == MAGIC) and _all(_READABLE[env["version"]])


def _objects(items: list[Any]) -> Any:
    """``items`` as a numpy object array (to be indexed by row)."""
    array = np.empty(len(items), object)
    for index, item in enumerate(items):
        array[index] = item
    return array


def _plan_rows(joined: Joined, env: Any, registry: MessageRegistry) -> tuple[list[Plan], Any]:
    """The cached plans of the payloads (``_NO_PLAN`` for one without): the distinct ones
    and, per payload, the index of its own among them.

    Payloads are grouped by type and body length; a group whose bodies are all the same
    bytes (consecutive messages of one producer) is looked up once, the payloads of any
    other group by their own bodies.
    """
    codes = env["msg_type"].astype(np.int64)
    lengths = env["json_len"].astype(np.int64)
    keys = (codes << 32) | lengths
    rows = np.empty(len(codes), np.int64)
    found: list[Plan] = []
    seen: dict[tuple[int, int], int] = {}  # (id of the plan, type) -> its index in found

    def index_of(plan: Plan, code: int) -> int:
        key = (id(plan), code)  # _NO_PLAN once per type: the unchecked plan is per type
        at = seen.get(key)
        if at is None:
            at = seen[key] = len(found)
            found.append(plan)
        return at

    pending = np.arange(len(codes))
    while len(pending):  # a group at a time: a batch holds a few (a DML type, ticks)
        first = int(pending[0])
        same = keys[pending] == keys[first]
        members, pending = pending[same], pending[~same]
        code, length = int(codes[first]), int(lengths[first])
        bodies = joined.parts(members, ENVELOPE_SIZE, length)
        body = bodies[0].tobytes()
        if bodies.tobytes() == body * len(members):
            rows[members] = index_of(registry.plans.get((code, body), _NO_PLAN), code)
            continue
        for member, other in zip(members.tolist(), bodies, strict=True):
            rows[member] = index_of(registry.plans.get((code, other.tobytes()), _NO_PLAN), code)
    return found, rows


def _unchecked_plans(
    found: list[Plan],
    env: Any,
    rows: Any,
    registry: MessageRegistry,
    max_bytes: int,
    unchecked: frozenset[int],
) -> bool:
    """Give the payloads without a plan the unchecked plan of their type, in place (in
    ``found``, whose ``_NO_PLAN`` entries are one per type), as :func:`_unchecked_plan`
    would one by one: each must be of a type in ``unchecked``, of the current codec
    version and have a timestamp; their checksums are checked with the batch's. False
    (nothing changed) if one does not qualify."""
    lacking = [index for index, plan in enumerate(found) if plan is _NO_PLAN]
    if not lacking:
        return True
    members = np.isin(rows, lacking)
    types = env["msg_type"][members]
    if not (
        np.isin(types, list(unchecked)).all()
        and (env["version"][members] == VERSION).all()
        and (env["timestamp"][members] != 0).all()
    ):
        return False
    replaced: dict[int, Plan] = {}
    for index in lacking:
        unchecked_plan = registry.unchecked_plan(int(env["msg_type"][rows == index][0]), max_bytes)
        if unchecked_plan is None:
            return False
        replaced[index] = unchecked_plan
    for index, plan in replaced.items():
        found[index] = plan
    return True


def _ts_ranges_agree(joined: Joined, found: list[Plan], rows: Any, env: Any) -> bool:
    """Whether every DML row's envelope time range is the min/max of its row timestamps
    (as :func:`_check_ts_range` checks on a full decode), in a few C-level passes per
    plan."""
    for index, plan in enumerate(found):
        most = plan.stamp_rows
        if not most:
            continue
        members = np.flatnonzero(rows == index)
        at = plan.stamps
        by_row = joined.parts(members, at.start, at.stop - at.start).view(_STAMP)
        low, high = (by_row[:, 0], by_row[:, 0]) if most == 1 else (by_row.min(1), by_row.max(1))
        if not (_all(low == env["begin_ts"][members]) and _all(high == env["end_ts"][members])):
            return False
    return True


def _decode_each(
    payloads: Sequence[bytes],
    registry: MessageRegistry,
    max_bytes: int,
    unchecked: frozenset[int] = frozenset(),
) -> DecodedBatch:
    batch = DecodedBatch()
    for index, payload in enumerate(payloads):
        try:
            found = _unchecked_plan(payload, registry, max_bytes, unchecked) if unchecked else None
            head, plan, ts = found or _decode_one(payload, registry, max_bytes)
        except CodecError as exc:
            batch.bad.append((index, exc))
            continue
        if type(plan) is ReadyPlan:
            batch.ready.append(len(batch.plans))
        batch.plans.append(plan)
        batch.ts.append(ts)
        batch.kinds.append(plan.kind)
        batch.msg_ids.append(head[_MSG_ID])
        batch.stamps.append(head[_TIMESTAMP])
        batch.sources.append(head[_SOURCE_ID])
    return batch


def _decode_one(
    payload: bytes, registry: MessageRegistry, max_bytes: int
) -> tuple[tuple[Any, ...], Plan, int]:
    size = len(payload)
    if type(payload) is bytes and ENVELOPE_SIZE <= size <= max_bytes:
        head = _ENVELOPE.unpack_from(payload)
        body_end = ENVELOPE_SIZE + head[_JSON_LEN]
        key = (head[_MSG_TYPE], payload[ENVELOPE_SIZE:body_end])
        plan = registry.plans.get(key) if body_end <= size else None
        if (
            plan is not None
            and plan.need <= size
            and head[_MAGIC] == MAGIC
            and head[_VERSION] in READABLE_VERSIONS
            and crc32(payload[_TAIL], crc32(payload[_HEAD])) == head[_CRC]
            and plan.ts_range_agrees(payload, head[_BEGIN_TS], head[_END_TS])
        ):
            return head, plan, head[plan.ts_field]
    msg, body, body_end = _decode(payload, registry, max_bytes)
    head = _ENVELOPE.unpack_from(payload)
    found = plan_for(type(msg), body, body_end) if type(payload) is bytes else None
    if found is None:
        return head, ReadyPlan(msg), msg.end_ts
    if len(registry.plans) >= PLAN_CACHE_SIZE:
        registry.plans.clear()
    registry.plans[head[_MSG_TYPE], payload[ENVELOPE_SIZE:body_end]] = found
    return head, found, head[found.ts_field]


def _unchecked_plan(
    payload: bytes,
    registry: MessageRegistry,
    max_bytes: int,
    unchecked: frozenset[int],
) -> tuple[tuple[Any, ...], Plan, int] | None:
    """The :class:`~msgstream.wire.plans.UncheckedDmlPlan` of ``payload``'s type if that is in
    ``unchecked``, it has no cached plan and passes the checks that plan promises; None:
    take :func:`_decode_one`'s way."""
    if type(payload) is not bytes or not ENVELOPE_SIZE <= len(payload) <= max_bytes:
        return None
    if _ENVELOPE.unpack_from(payload)[_MSG_TYPE] not in unchecked:
        return None
    intact = intact_envelope(payload)
    if intact is None:
        return None
    head, body_end = intact
    if head[_VERSION] != VERSION or head[_TIMESTAMP] == 0:
        return None
    body_bytes = payload[ENVELOPE_SIZE:body_end]
    if (head[_MSG_TYPE], body_bytes) in registry.plans:
        return None  # a cached plan checks the body as cheaply
    plan = registry.unchecked_plan(head[_MSG_TYPE], max_bytes)
    return None if plan is None else (head, plan, head[_END_TS])


def to_jsonable(msg: TsMsg) -> dict[str, Any]:
    """A JSON-friendly view of a message, for printing (vectors become lists)."""
    out: dict[str, Any] = {
        "type": type(msg).__name__,
        "msg_id": msg.msg_id,
        "timestamp": msg.timestamp,
        "source_id": msg.source_id,
    }
    body = msg.body_fields()
    for key, value in body.items():
        out[key] = _printable(value)
    if msg.position is not None:
        out["position"] = msg.position.to_dict()
    return out


def _printable(value: Any) -> Any:
    if isinstance(value, CollectionSchema):
        return value.to_dict()
    if isinstance(value, FieldData):
        return _printable(value.values)
    if isinstance(value, PackedValues):
        return _printable(value.tolist())
    if isinstance(value, list):
        if value and isinstance(value[0], FieldData):
            return {c.name: _printable(c.values) for c in value}
        return [_printable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
