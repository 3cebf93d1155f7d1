"""``encode_batch`` and ``encode_one`` against ``encode``: the same bytes, sizes and errors
for any pack and any message.

The fast path (one-row Inserts grouped by shape) must be invisible: whatever the mix of
messages, columns, lengths and bad values, a pack encodes to exactly what encoding each
message on its own gives, or raises the error the first bad message raises there.
"""

from __future__ import annotations

import gc
import linecache
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msgstream.wire.batch_encoder as batch_encoder
from msgstream.errors import CodecError, UnknownMessageTypeError
from msgstream.wire.batch_encoder import MIN_BATCH, encode_batch, encode_one
from msgstream.wire.codec import MessageRegistry, decode, encode
from msgstream.wire.generated import source
from msgstream.wire.messages import BUILTIN_TYPES, DeleteMsg, InsertMsg, TimeTickMsg, TsMsg
from msgstream.wire.schema import DataType, FieldData

_U64 = 1 << 64
_I64 = 1 << 63


def one_row(
    msg_id: int,
    *,
    text: str = "abc",
    blob: bytes = b"\x00\x01",
    collection: str = "c",
    partition: str = "_default",
    timestamp: int | None = None,
    source_id: int = 7,
) -> InsertMsg:
    stamp = 1000 + msg_id if timestamp is None else timestamp
    return InsertMsg(
        msg_id=msg_id,
        timestamp=stamp,
        source_id=source_id,
        collection_name=collection,
        partition_name=partition,
        row_ids=[msg_id * 10],
        fields=[
            FieldData("pk", DataType.INT64, np.array([msg_id])),
            FieldData("score", DataType.FLOAT, np.array([msg_id / 3], np.float32)),
            FieldData("ok", DataType.BOOL, np.array([msg_id % 2 == 0])),
            FieldData("vec", DataType.FLOAT_VECTOR, np.full((1, 3), msg_id, np.float32), dim=3),
            FieldData("name", DataType.VARCHAR, [text]),
            FieldData("raw", DataType.BINARY, [blob]),
        ],
    )


def per_message(msgs: list[TsMsg], registry: MessageRegistry | None = None) -> list[bytes]:
    return [encode(m) if registry is None else encode(m, registry) for m in msgs]


def assert_same_error(
    reference: Callable[[], object], fast: Callable[[], object], needle: str
) -> None:
    """``fast`` raises exactly the CodecError ``reference`` (encoding message by message)
    raises, whose text holds ``needle``."""
    with pytest.raises(CodecError) as expected:
        reference()
    assert needle in str(expected.value)
    with pytest.raises(type(expected.value)) as got:
        fast()
    assert str(got.value) == str(expected.value)


@pytest.fixture(autouse=True)
def fresh_bodies(monkeypatch: pytest.MonkeyPatch) -> dict[Any, bytes]:
    """Each test starts with no kept bodies and no pause (encode_one's state is global)."""
    kept: dict[Any, bytes] = {}
    monkeypatch.setattr(batch_encoder, "_bodies", kept)
    monkeypatch.setattr(batch_encoder, "_reuse", [0, 0, 0])
    return kept


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """Each group the fast path is asked to encode: its size, and whether it did."""
    seen: list[tuple[int, bool]] = []
    real = batch_encoder._encode_group

    def recording(group: list[Any], columns: Any) -> list[bytes] | None:
        encoded = real(group, columns)
        seen.append((len(group), encoded is not None))
        return encoded

    monkeypatch.setattr(batch_encoder, "_encode_group", recording)
    return seen


def test_a_pack_of_one_row_inserts_takes_the_fast_path_and_matches_encode(
    groups: list[tuple[int, bool]],
) -> None:
    msgs: list[TsMsg] = [one_row(i, text="é" * (i % 2), blob=bytes(i % 3)) for i in range(40)]
    payloads = encode_batch(msgs)
    assert groups == [(40, True)]  # one group: one collection, partition and set of columns
    assert payloads == per_message(msgs)
    assert [m.size for m in msgs] == [len(p) for p in payloads]
    assert [decode(p) for p in payloads] == msgs


def test_inserts_of_one_collection_with_other_columns_are_grouped_apart(
    groups: list[tuple[int, bool]],
) -> None:
    plain: list[TsMsg] = [one_row(i) for i in range(12)]
    narrow: list[TsMsg] = [one_row(100 + i) for i in range(10)]
    masked: list[TsMsg] = [one_row(200 + i) for i in range(9)]
    for msg in narrow:
        assert isinstance(msg, InsertMsg)
        del msg.fields[1:3]
    for msg in masked:
        assert isinstance(msg, InsertMsg)
        msg.fields[0].valid = np.array([True])
    msgs = [m for trio in zip(plain, narrow, masked, strict=False) for m in trio]
    msgs += plain[9:] + narrow[9:]
    assert encode_batch(msgs) == per_message(msgs)
    assert sorted(groups) == [(10, True), (12, True)]  # the masked ones go message by message


def _one_body(msg_id: int, variant: str) -> InsertMsg:
    """A one-row Insert whose JSON body is the same for every ``msg_id`` of a variant."""
    if variant == "extreme-headers":
        msg = one_row(msg_id, timestamp=_U64 - 1 - msg_id, source_id=-_I64 + msg_id)
        msg.msg_id = _I64 - 1 - msg_id
        return msg
    if variant == "empty-values":
        return one_row(msg_id, text="", blob=b"")
    if variant == "stamps-as-a-list":  # not arrays: the time range comes from time_range()
        msg = one_row(msg_id)
        msg.row_timestamps = [5000 + msg_id]  # type: ignore[assignment]
        return msg
    return one_row(msg_id, text="né", blob=b"\x00" * 9)


@pytest.mark.parametrize(
    "variant", ["plain", "extreme-headers", "empty-values", "stamps-as-a-list"]
)
def test_a_pack_of_one_body_is_filled_as_records_and_matches_encode(
    groups: list[tuple[int, bool]], variant: str
) -> None:
    msgs: list[TsMsg] = [_one_body(i, variant) for i in range(50)]
    payloads = encode_batch(msgs)
    assert groups == [(50, True)]
    assert payloads == per_message(msgs)
    assert [m.size for m in msgs] == [len(p) for p in payloads]
    assert [decode(p).msg_id for p in payloads] == [m.msg_id for m in msgs]


def test_values_that_are_views_of_a_larger_array_stay_on_the_fast_path(
    groups: list[tuple[int, bool]],
) -> None:
    msgs = [one_row(i) for i in range(20)]
    big = np.arange(20 * 6, dtype=np.float32).reshape(20, 6)
    for i, msg in enumerate(msgs):
        msg.fields[3].values = big[i : i + 1, ::2]  # one row of three, not contiguous
        assert not msg.fields[3].values.flags["C_CONTIGUOUS"]
    packed: list[TsMsg] = list(msgs)
    assert encode_batch(packed) == per_message(packed)
    assert groups == [(20, True)]


def test_arrays_of_one_size_but_other_shapes_encode_as_encode_does(
    groups: list[tuple[int, bool]],
) -> None:
    """The fast path checks a row count and a size, not a shape: an array reshaped after
    the message was built (a vector of (1, 4) as (1, 2, 2), row ids as (1, 1)) writes the
    bytes it holds, as encode does, and a vector of another size leaves the fast path."""
    msgs = [one_row(i) for i in range(20)]
    for msg in msgs:
        msg.fields[3].values = np.zeros((1, 4), np.float32)
    msgs[3].fields[3].values = msgs[3].fields[3].values.reshape(1, 2, 2)
    msgs[5].row_ids = msgs[5].row_ids.reshape(1, 1)
    packed: list[TsMsg] = list(msgs)
    assert encode_batch(packed) == per_message(packed)
    assert groups == [(20, True)]
    groups.clear()
    msgs[7].fields[3].values = np.zeros((1, 5), np.float32)
    assert encode_batch(packed) == per_message(packed)
    assert groups == []


def test_a_pack_of_many_columns_is_filled_whole(groups: list[tuple[int, bool]]) -> None:
    """Each buffer is a field of the record: three hundred columns make six hundred."""
    msgs: list[TsMsg] = [
        InsertMsg(
            msg_id=i, timestamp=1000 + i, collection_name="c", row_ids=[i],
            fields=[FieldData(f"s{c}", DataType.VARCHAR, [f"{c % 10}"]) for c in range(300)],
        )
        for i in range(20)
    ]  # fmt: skip
    assert encode_batch(msgs) == per_message(msgs)
    assert groups == [(20, True)]


def test_a_body_in_a_pack_of_several_is_joined_and_matches_encode(
    groups: list[tuple[int, bool]],
) -> None:
    # Runs of each body, long and short, interleaved: each message keeps its place.
    msgs: list[TsMsg] = [
        one_row(i, text="x" * (i % 3), blob=bytes(i % 40 // 39)) for i in range(80)
    ]
    payloads = encode_batch(msgs)
    assert groups == [(80, True)]
    assert payloads == per_message(msgs)
    assert [m.size for m in msgs] == [len(p) for p in payloads]


def test_mixed_packs_keep_their_order() -> None:
    msgs: list[TsMsg] = []
    for i in range(30):
        msgs.append(one_row(i, collection="a" if i % 2 else "b"))
        if i % 7 == 0:
            msgs.append(
                DeleteMsg(msg_id=100 + i, timestamp=5000 + i, collection_name="a", primary_keys=[i])
            )
            msgs.append(TimeTickMsg(msg_id=200 + i, timestamp=6000 + i))
    payloads = encode_batch(msgs)
    assert payloads == per_message(msgs)
    assert [decode(p) for p in payloads] == msgs


def test_small_packs_and_unregistered_inserts_go_message_by_message() -> None:
    few: list[TsMsg] = [one_row(i) for i in range(MIN_BATCH - 1)]
    assert encode_batch(few) == per_message(few)
    bare = MessageRegistry(tuple(t for t in BUILTIN_TYPES if t is not InsertMsg))
    many: list[TsMsg] = [one_row(i) for i in range(MIN_BATCH * 2)]
    with pytest.raises(UnknownMessageTypeError, match="InsertMsg"):
        encode_batch(many, bare)


BAD_MESSAGES = pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (lambda m: setattr(m, "msg_id", _I64), "msg_id must fit int64"),
        (lambda m: setattr(m, "source_id", -_I64 - 1), "source_id"),
        (lambda m: setattr(m, "timestamp", 1.5), "header out of range"),
        (lambda m: m.fields[4].values.__setitem__(0, "\ud800"), "field 'name'"),
        (lambda m: setattr(m, "fields", {"name": m.fields[0]}), "no attribute 'dtype'"),
    ],
    ids=["msg_id", "source_id", "float-timestamp", "surrogate", "fields-a-dict"],
)
"""A message spoilt in a way encode refuses, and what its error says."""


@BAD_MESSAGES
def test_a_bad_message_raises_what_encode_raises(bad: Any, needle: str) -> None:
    msgs: list[TsMsg] = [one_row(i) for i in range(20)]
    bad(msgs[13])
    assert_same_error(lambda: per_message(msgs), lambda: encode_batch(msgs), needle)


def test_unusual_values_leave_the_rest_of_the_pack_on_the_fast_path(
    groups: list[tuple[int, bool]],
) -> None:
    msgs: list[TsMsg] = [one_row(i) for i in range(20)]
    cells = [m.fields for m in msgs if isinstance(m, InsertMsg)]
    cells[3][0].values = np.array([3], np.int32)  # not the column's int64
    cells[4][4].values = [None]  # a null varchar
    cells[5][5].values = (b"tuple",)  # a tuple is taken like a list
    cells[6][1].values = [0.5]  # a list where an array belongs
    assert encode_batch(msgs) == per_message(msgs)
    assert groups == [(17, True)]  # all but the int32, the null and the list


def test_row_ids_that_are_no_array_are_a_codec_error_naming_the_message() -> None:
    msgs: list[TsMsg] = [one_row(i) for i in range(20)]
    assert isinstance(msgs[4], InsertMsg)
    msgs[4].row_ids = 5  # type: ignore[assignment]
    for encoder in (per_message, encode_batch):
        with pytest.raises(CodecError, match=r"InsertMsg\(msg_id=4\): body is not JSON-serial"):
            encoder(msgs)


def test_row_ids_of_another_type_send_their_group_message_by_message() -> None:
    msgs: list[TsMsg] = [one_row(i) for i in range(20)]
    assert isinstance(msgs[6], InsertMsg)
    msgs[6].row_ids = np.array([60], ">i8")
    assert encode_batch(msgs) == per_message(msgs)


def _texts(msg_id: int, lengths: tuple[int, ...]) -> InsertMsg:
    return InsertMsg(
        msg_id=msg_id,
        timestamp=1000 + msg_id,
        collection_name="c",
        row_ids=[msg_id],
        fields=[FieldData(f"s{i}", DataType.VARCHAR, ["x" * n]) for i, n in enumerate(lengths)],
    )


@pytest.mark.parametrize(
    ("lengths", "calls"),
    [
        ([(i % 5, 3, i % 2) for i in range(200)], [(200, True)]),  # 10 bodies: column-wise
        ([(i, i % 7, 1) for i in range(200)], []),  # the first 64 differ: not even tried
        ([(1, 1, 1)] * 64 + [(i, 2, 2) for i in range(136)], [(200, False)]),  # 137 bodies
    ],
    ids=["repeating", "distinct", "distinct-after-the-sample"],
)
def test_groups_whose_bodies_mostly_differ_go_message_by_message(
    groups: list[tuple[int, bool]], lengths: list[tuple[int, ...]], calls: list[Any]
) -> None:
    msgs: list[TsMsg] = [_texts(i, shape) for i, shape in enumerate(lengths)]
    assert encode_batch(msgs) == per_message(msgs)
    assert groups == calls


# --- any pack ---------------------------------------------------------------------------

_TEXT = st.text(max_size=6)
_BLOB = st.binary(max_size=6)
_STAMP = st.integers(1, _U64 - 1)


@st.composite
def insert(draw: st.DrawFn, msg_id: int) -> InsertMsg:
    rows = draw(st.sampled_from([1, 1, 1, 1, 2]))
    kinds = draw(st.sampled_from(["plain", "plain", "plain", "masked", "nulls", "json"]))
    columns = [
        FieldData("pk", DataType.INT64, np.arange(rows) + msg_id),
        FieldData("name", DataType.VARCHAR, draw(st.lists(_TEXT, min_size=rows, max_size=rows))),
    ]
    collection = draw(st.sampled_from(["c", "d"]))
    if collection == "c":
        columns.append(
            FieldData("raw", DataType.BINARY, draw(st.lists(_BLOB, min_size=rows, max_size=rows)))
        )
    if kinds == "masked":
        columns.append(FieldData("d", DataType.DOUBLE, np.zeros(rows), valid=[False] * rows))
    elif kinds == "nulls":
        columns.append(FieldData("n", DataType.VARCHAR, [None] * rows))
    elif kinds == "json":
        columns.append(FieldData("j", DataType.JSON, [{"k": msg_id}] * rows))
    stamps = draw(st.lists(_STAMP, min_size=rows, max_size=rows))
    return InsertMsg(
        msg_id=msg_id,
        timestamp=draw(st.sampled_from([0, max(stamps)])) or max(stamps),
        source_id=draw(st.integers(-_I64, _I64 - 1)),
        collection_name=collection,
        partition_name=draw(st.sampled_from(["_default", "p"])),
        row_ids=np.arange(rows) + msg_id,
        row_timestamps=stamps,
        fields=columns,
    )


@st.composite
def packs(draw: st.DrawFn) -> list[TsMsg]:
    count = draw(st.integers(0, 3 * MIN_BATCH))
    msgs: list[TsMsg] = []
    for msg_id in range(count):
        kind = draw(st.sampled_from(["insert"] * 6 + ["delete", "tick"]))
        if kind == "insert":
            msgs.append(draw(insert(msg_id)))
        elif kind == "delete":
            msgs.append(
                DeleteMsg(
                    msg_id=msg_id,
                    timestamp=draw(_STAMP),
                    collection_name="c",
                    primary_keys=[msg_id],
                )
            )
        else:
            msgs.append(TimeTickMsg(msg_id=msg_id, timestamp=draw(_STAMP)))
    return msgs


@given(packs())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_pack_encodes_as_each_message_does(msgs: list[TsMsg]) -> None:
    payloads = encode_batch(msgs)
    assert payloads == per_message(msgs)
    assert [m.size for m in msgs] == list(map(len, payloads))


# --- one message at a time ------------------------------------------------------------------


@given(packs())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_message_encodes_alone_as_encode_does(msgs: list[TsMsg]) -> None:
    """Each message twice: the first of its shape writes the body the second reuses."""
    for msg in msgs + msgs:
        batch_encoder._reuse[:] = [0, 0, 0]  # never paused here: every message is tried
        expected = encode(msg)
        size = msg.size
        msg.size = 0
        assert encode_one(msg) == expected
        assert msg.size == size == len(expected)


def test_a_shape_seen_before_reuses_its_body(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[int] = []
    real = InsertMsg.encode_body

    def counting(msg: InsertMsg, writer: Any) -> Any:
        written.append(msg.msg_id)
        return real(msg, writer)

    monkeypatch.setattr(InsertMsg, "encode_body", counting)
    msgs = [one_row(i, text="ab" if i % 2 else "abc") for i in range(6)]
    payloads = [encode_one(m) for m in msgs]
    assert written == [0, 1]  # one body a shape: the texts' two lengths
    monkeypatch.setattr(InsertMsg, "encode_body", real)
    assert payloads == per_message(list(msgs))
    assert [decode(p) for p in payloads] == msgs


def test_the_kept_shapes_are_bounded(
    monkeypatch: pytest.MonkeyPatch, fresh_bodies: dict[Any, bytes]
) -> None:
    kept = fresh_bodies
    monkeypatch.setattr(batch_encoder, "SHAPES_KEPT", 3)
    for i in range(10):
        msg = one_row(i, text="x" * i)
        assert encode_one(msg) == encode(msg)
        assert 1 <= len(kept) <= 3


def test_one_encoder_is_written_per_tuple_of_column_types(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message alone is encoded by a function written for its columns' types: one per
    tuple of types (not per message), none for a type the fast path does not take (the
    message is then encoded by encode), and only so many kept."""
    encoders: dict[Any, Any] = {}
    monkeypatch.setattr(batch_encoder, "_SINGLE_ENCODERS", encoders)
    msgs = [one_row(i, text="t" * i) for i in range(5)]
    assert [encode_one(m) for m in msgs] == per_message(list(msgs))
    types = tuple(column.dtype for column in msgs[0].fields)
    assert list(encoders) == [types]
    text = source(encoders[types])
    assert "c5, = fields" in text and text.count(".tobytes()") == 2 + 4  # row arrays, fixed
    as_json = InsertMsg(
        msg_id=9, timestamp=9, collection_name="c", row_ids=[1],
        fields=[FieldData("doc", DataType.JSON, [{"a": 1}])],
    )  # fmt: skip
    assert encode_one(as_json) == encode(as_json)
    assert encoders[(DataType.JSON,)] is None
    monkeypatch.setattr(batch_encoder, "SHAPES_KEPT", 2)
    for width in range(1, 5):
        msg = one_row(0)
        msg.fields = msg.fields[:width]
        assert encode_one(msg) == encode(msg)
        assert 1 <= len(encoders) <= 2


@BAD_MESSAGES
def test_a_bad_message_alone_raises_what_encode_raises(bad: Any, needle: str) -> None:
    assert encode_one(one_row(1)) == encode(one_row(1))  # its shape is known
    msg = one_row(2)
    bad(msg)
    assert_same_error(lambda: encode(msg), lambda: encode_one(msg), needle)


def test_an_unregistered_insert_alone_is_refused() -> None:
    bare = MessageRegistry(tuple(t for t in BUILTIN_TYPES if t is not InsertMsg))
    with pytest.raises(UnknownMessageTypeError, match="InsertMsg"):
        encode_one(one_row(1), bare)


def test_bodies_of_ever_changing_shapes_are_not_kept(
    monkeypatch: pytest.MonkeyPatch, fresh_bodies: dict[Any, bytes]
) -> None:
    """Texts of a new length each time: after a window of mostly new bodies, messages are
    encoded plainly for a pause, then keeping is tried again."""
    kept = fresh_bodies
    monkeypatch.setattr(batch_encoder, "REUSE_WINDOW", 8)
    monkeypatch.setattr(batch_encoder, "REUSE_PAUSE", 20)
    monkeypatch.setattr(batch_encoder, "SHAPES_KEPT", 1000)
    msgs = [one_row(i, text="x" * i) for i in range(40)]
    for msg in msgs:
        assert encode_one(msg) == encode(msg)
    # 8 kept, then 20 encoded plainly, then 8 more kept, then 4 plainly
    assert len(kept) == 16
    same = [one_row(i, text="z" * 100) for i in range(40, 80)]  # a length not seen yet
    assert [encode_one(m) for m in same] == per_message(list(same))
    assert len(kept) == 17  # once the pause is over: one body for all of them


def test_an_encoder_no_longer_kept_takes_its_source_along(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Generated encoders show in tracebacks through ``linecache``; one dropped from the
    bounded cache leaves nothing there (shapes that churn would otherwise grow it)."""
    encoders: dict[Any, Any] = {}
    monkeypatch.setattr(batch_encoder, "_SINGLE_ENCODERS", encoders)
    msg = one_row(1)
    assert encode_one(msg) == encode(msg)
    (encoder,) = encoders.values()
    filename = encoder.__code__.co_filename
    assert filename in linecache.cache
    del encoder
    encoders.clear()
    gc.collect()
    assert filename not in linecache.cache
