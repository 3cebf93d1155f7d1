"""Insert payloads to Arrow in whole-batch passes: the same rows as decoding each message
into a FrameBuilder, and a refusal (so the caller decodes one by one) wherever decode()
would fail or the message does not fit the frame (no Spark)."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.gc_runs import collections_during
from msgstream import (
    CollectionSchema,
    DataType,
    DecodeError,
    DeleteMsg,
    FieldData,
    FieldSchema,
    InsertMsg,
    decode,
    encode,
)
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema
from msgstream.bridge_spark.data import columnar
from msgstream.bridge_spark.data.body_shapes import BodyShape, shape_of
from msgstream.bridge_spark.data.clients import open_reader
from msgstream.bridge_spark.data.columnar import BatchRefused, InsertColumns
from msgstream.bridge_spark.data.cursor import SkipStats
from msgstream.bridge_spark.data.slices import ChannelSlice, read_slice
from msgstream.wire import envelope
from msgstream.wire.codec import ENVELOPE_SIZE
from spark.data import rocksmq_config

from .test_convert import ALL_TYPES, all_types_insert

_PREFIX = struct.Struct("<2sBBHqQqQQI")
_BEGIN = envelope.offset("begin_ts")


def reseal(payload: bytes) -> bytes:
    """``payload`` with its checksum recomputed (after editing its bytes)."""
    prefix = payload[: _PREFIX.size]
    crc = zlib.crc32(payload[ENVELOPE_SIZE:], zlib.crc32(prefix))
    return prefix + crc.to_bytes(4, "little") + payload[ENVELOPE_SIZE:]


def edit_body(payload: bytes, change: Any) -> bytes:
    """``payload`` with its JSON body replaced by ``change(body)`` (same buffers)."""
    head = list(_PREFIX.unpack_from(payload))
    body_end = ENVELOPE_SIZE + head[-1]
    body = orjson.loads(payload[ENVELOPE_SIZE:body_end])
    new_body = orjson.dumps(change(body))
    head[-1] = len(new_body)
    return reseal(_PREFIX.pack(*head) + b"\0\0\0\0" + new_body + payload[body_end:])


def edit_bytes(payload: bytes, old: bytes, new: bytes) -> bytes:
    """``payload`` with ``old`` (once in it) replaced by ``new`` of the same length."""
    assert len(old) == len(new) and payload.count(old) == 1
    at = payload.index(old)
    return reseal(payload[:at] + new + payload[at + len(old) :])


def edit_buffer(payload: bytes, field: str, part: str, data: bytes) -> bytes:
    """``payload`` with the start of one field's buffer ``part`` overwritten."""
    head = _PREFIX.unpack_from(payload)
    base = ENVELOPE_SIZE + head[-1]
    body = orjson.loads(payload[ENVELOPE_SIZE:base])
    spec = next(f for f in body["fields"] if f["name"] == field)
    at = base + spec[part]["o"]
    return reseal(payload[:at] + data + payload[at + len(data) :])


def texts_insert(msg_id: int, texts: list[str | None], json: list[Any]) -> InsertMsg:
    rows = len(texts)
    pks = list(range(msg_id * 100, msg_id * 100 + rows))
    return InsertMsg(
        msg_id=msg_id,
        timestamp=1000 + msg_id,
        collection_name="all",
        partition_name=f"p{msg_id % 2}",
        row_ids=pks,
        row_timestamps=[900 + msg_id + i for i in range(rows)],
        fields=[
            FieldData("pk", DataType.INT64, pks),
            FieldData("s", DataType.VARCHAR, texts),
            FieldData("j", DataType.JSON, json),
            FieldData("vec", DataType.FLOAT_VECTOR, [[float(p), 0.5, -1.0] for p in pks], dim=3),
        ],
    )


def decoded_table(frame: FrameSchema, payloads: list[tuple[bytes, str]]) -> pa.Table:
    builder = FrameBuilder(frame)
    for payload, channel in payloads:
        builder.add(decode(payload), channel)
    return builder.build()


def columnar_table(frame: FrameSchema, payloads: list[tuple[bytes, str]]) -> pa.Table:
    columns = InsertColumns(frame)
    for payload, channel in payloads:
        assert columns.offer(payload, channel), "the fast path refused a sound payload"
    assert columns.rows == sum(decode(p).num_rows for p, _ in payloads)  # type: ignore[attr-defined]
    return columns.build()


SOUND = [
    (encode(all_types_insert(7, 100, (1, 2, 3))), "ch-a"),
    (encode(all_types_insert(8, 200, (4, 5, 6))), "ch-b"),
    (encode(all_types_insert(9, 300, (7, 8, 9))), "ch-a"),
]


@pytest.mark.parametrize("kind", [FrameKind.CHANGES, FrameKind.INSERTS])
def test_every_type_and_null_as_decoding_message_by_message(kind: FrameKind) -> None:
    frame = FrameSchema(ALL_TYPES, kind)
    table = columnar_table(frame, SOUND)
    assert table.schema.equals(frame.arrow_schema)
    assert table.equals(decoded_table(frame, SOUND))


def test_text_json_and_vectors_across_many_messages() -> None:
    frame = FrameSchema(
        CollectionSchema(
            "all", tuple(f for f in ALL_TYPES.fields if f.name in ("pk", "s", "j", "vec"))
        ),
        FrameKind.CHANGES,
    )
    payloads = [
        (encode(texts_insert(1, ["héllo", "", "ü"], [{"a": "x,]"}, None, 's\\"'])), "c"),
        (encode(texts_insert(2, [None, "🙂"], [[1, [2]], "null"])), "c"),
        (encode(texts_insert(3, [""], [None])), "d"),
    ]
    table = columnar_table(frame, payloads)
    assert table.equals(decoded_table(frame, payloads))
    assert table.column("s").to_pylist() == ["héllo", "", "ü", None, "🙂", ""]
    assert table.column("j").to_pylist() == [
        '{"a":"x,]"}',
        None,
        '"s\\\\\\""',
        "[1,[2]]",
        '"null"',
        None,
    ]
    assert table.column("_partition").to_pylist() == ["p1"] * 3 + ["p0"] * 2 + ["p1"]


_TEXTS_FRAME = FrameSchema(
    CollectionSchema(
        "all", tuple(f for f in ALL_TYPES.fields if f.name in ("pk", "s", "j", "vec"))
    ),
    FrameKind.CHANGES,
)
_ROW = st.tuples(
    st.one_of(st.none(), st.text(max_size=12)),
    st.one_of(st.none(), st.integers(-50, 50), st.text(max_size=4), st.lists(st.integers(0, 9))),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_ROW, min_size=1, max_size=4), min_size=1, max_size=12))
def test_random_batches_build_as_decoding_them_one_by_one(batch: list[list[Any]]) -> None:
    """Messages of one to four rows, texts and JSON of any size, nulls anywhere: bodies
    of a shape seen are read by position, the others parsed, into decode's rows."""
    payloads = [
        (encode(texts_insert(i + 1, [t for t, _ in rows], [j for _, j in rows])), "c")
        for i, rows in enumerate(batch)
    ]
    assert columnar_table(_TEXTS_FRAME, payloads).equals(decoded_table(_TEXTS_FRAME, payloads))


def test_building_a_large_batch_sets_off_no_garbage_collection() -> None:
    """Joining the columns of 3,000 messages makes no objects the collector tracks (a
    memoryview per piece did: over a hundred young collections, each walking what a
    Spark driver holds)."""
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    payloads = [encode(all_types_insert(i, i * 10, (1, 2, 3))) for i in range(1, 3001)]
    columns = InsertColumns(frame)
    columns.offer(payloads[0], "ch")
    columns.build()  # the first JSON check imports simdjson (a module's many objects)
    columns.clear()
    for payload in payloads:
        assert columns.offer(payload, "ch")
    table, collections = collections_during(columns.build)
    assert table.num_rows == 9000
    assert len(collections) <= 2, collections


def test_clear_starts_a_new_batch() -> None:
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    columns = InsertColumns(frame)
    assert columns.offer(*SOUND[0])
    columns.build()
    columns.clear()
    assert columns.rows == 0 and columns.payloads == []
    assert columns.offer(*SOUND[1])
    assert columns.build().equals(decoded_table(frame, [SOUND[1]]))


def _counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bodies ``InsertColumns`` parses from now on."""
    parsed: list[bytes] = []
    parse = InsertColumns._parse

    def counting(self: InsertColumns, body: bytes, index: int) -> Any:
        parsed.append(body)
        return parse(self, body, index)

    monkeypatch.setattr(InsertColumns, "_parse", counting)
    return parsed


def test_a_body_of_a_shape_seen_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bodies that differ only in their numbers are parsed once: the others' numbers are
    read by position when the batch is built, into the same table."""
    parsed = _counting_parses(monkeypatch)
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    payloads = [(encode(all_types_insert(i, i * 10, (i, i + 1, i + 2))), "c") for i in (7, 8, 9)]
    table = columnar_table(frame, payloads)
    assert len(parsed) == 1
    assert table.equals(decoded_table(frame, payloads))
    assert table.column("pk").to_pylist() == [7, 8, 9, 8, 9, 10, 9, 10, 11]


def _with_digits(name: str, msg_id: int, partition: str) -> bytes:
    return encode(
        InsertMsg(
            msg_id=msg_id,
            timestamp=100 + msg_id,
            collection_name=name,
            partition_name=partition,
            row_ids=[msg_id],
            fields=[FieldData("pk", DataType.INT64, [msg_id])],
        )
    )


def test_digits_in_names_are_compared_not_read() -> None:
    """Two bodies of one shape whose names differ by a digit: another partition is
    taken as such, another collection refused."""
    schema = CollectionSchema("c1", (FieldSchema("pk", DataType.INT64, is_primary=True),))
    columns = InsertColumns(FrameSchema(schema, FrameKind.CHANGES))
    assert columns.offer(_with_digits("c1", 1, "p1"), "ch")
    assert columns.offer(_with_digits("c1", 2, "p2"), "ch")
    assert not columns.offer(_with_digits("c2", 3, "p1"), "ch")
    assert columns.offer(_with_digits("c1", 4, "p1"), "ch")
    table = columns.build()
    assert table.column("pk").to_pylist() == [1, 2, 4]
    assert table.column("_partition").to_pylist() == ["p1", "p2", "p1"]


def test_a_message_without_rows_is_refused_whether_its_shape_is_known_or_not() -> None:
    frame = FrameSchema(
        CollectionSchema(
            "all", tuple(f for f in ALL_TYPES.fields if f.name in ("pk", "s", "j", "vec"))
        ),
        FrameKind.CHANGES,
    )
    empty = encode(texts_insert(3, [], []))
    columns = InsertColumns(frame)
    assert not columns.offer(empty, "c")
    assert columns.offer(encode(texts_insert(4, ["a"], [1])), "c")
    assert shape_of(empty[ENVELOPE_SIZE:]) != b"" and not columns.offer(empty, "c")
    assert columns.rows == 1 and len(columns.payloads) == 1


def test_a_body_not_as_orjson_writes_it_is_parsed_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _counting_parses(monkeypatch)
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    spaced = [
        (_respaced(encode(all_types_insert(i, i * 10, (i, i + 1, i + 2)))), "c") for i in (7, 8)
    ]
    table = columnar_table(frame, spaced)
    assert len(parsed) == 2
    assert table.equals(decoded_table(frame, spaced))


def test_bodies_without_a_shape_stop_being_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Learning a shape re-serialises the body: bodies that have none (not as orjson
    writes them) are tried MAX_SHAPES times at most, then only parsed."""
    monkeypatch.setattr(columnar, "MAX_SHAPES", 2)
    tries: list[bytes] = []
    learn = BodyShape.learn

    def counting(body: bytes, parsed: Any) -> BodyShape | None:
        tries.append(body)
        return learn(body, parsed)

    monkeypatch.setattr(BodyShape, "learn", staticmethod(counting))
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    spaced = [
        (_respaced(encode(all_types_insert(i, i * 10, (i, i + 1, i + 2)))), "c") for i in (7, 8, 9)
    ]
    table = columnar_table(frame, spaced)
    assert len(tries) == 2
    assert table.equals(decoded_table(frame, spaced))


def _respaced(payload: bytes) -> bytes:
    """``payload`` with a space after each colon of its body (still the same JSON)."""
    head = list(_PREFIX.unpack_from(payload))
    body_end = ENVELOPE_SIZE + head[-1]
    body = payload[ENVELOPE_SIZE:body_end].replace(b'":', b'": ')
    head[-1] = len(body)
    return reseal(_PREFIX.pack(*head) + b"\0\0\0\0" + body + payload[body_end:])


def _other_collection(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "collection_name": "other"}


def _drop_field(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "fields": body["fields"][1:]}


def _twice(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "fields": [body["fields"][0], *body["fields"][:-1]]}


def _wrong_type(body: dict[str, Any]) -> dict[str, Any]:
    fields = [dict(f, dtype="int32") if f["name"] == "i8" else f for f in body["fields"]]
    return {**body, "fields": fields}


def _past_the_end(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "row_ids": {"o": 10**6, "n": body["row_ids"]["n"]}}


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            encode(DeleteMsg(msg_id=1, timestamp=5, collection_name="all", primary_keys=[1])),
            id="delete",
        ),
        pytest.param(SOUND[0][0][:-1], id="truncated"),
        pytest.param(SOUND[0][0][:2] + b"\x02" + SOUND[0][0][3:], id="version 2"),
        pytest.param(SOUND[0][0][:-1] + b"\x07", id="bad checksum"),
        pytest.param(edit_body(SOUND[0][0], _other_collection), id="other collection"),
        pytest.param(edit_body(SOUND[0][0], _drop_field), id="missing field"),
        pytest.param(edit_body(SOUND[0][0], _twice), id="field twice"),
        pytest.param(edit_body(SOUND[0][0], _wrong_type), id="other type"),
        pytest.param(b"not a payload at all, longer than an envelope is", id="garbage"),
    ],
)
def test_refuses_what_it_cannot_take_whole(payload: bytes) -> None:
    columns = InsertColumns(FrameSchema(ALL_TYPES, FrameKind.CHANGES))
    assert not columns.offer(payload, "c")
    assert columns.rows == 0 and columns.payloads == []


def test_a_checksum_a_reader_verified_is_not_computed_again() -> None:
    """A stream's reader verified a lazy message's checksum; ``checksum_verified`` skips
    the second pass over the payload (shown with a payload whose checksum is wrong)."""
    payload, channel = SOUND[0]
    wrong = payload[:-1] + bytes([payload[-1] ^ 1])  # a flipped bit in the last buffer
    columns = InsertColumns(FrameSchema(ALL_TYPES, FrameKind.CHANGES))
    assert not columns.offer(wrong, channel)
    assert columns.offer(wrong, channel, checksum_verified=True)
    assert columns.rows == 3


def test_deletes_frame_takes_no_insert() -> None:
    assert not InsertColumns(FrameSchema(ALL_TYPES, FrameKind.DELETES)).offer(*SOUND[0])


BAD_BATCHES = {
    "text not UTF-8": (edit_buffer(SOUND[1][0], "s", "data", b"h\xff"), "not UTF-8"),
    "offset cuts a character": (
        edit_buffer(SOUND[1][0], "s", "offs", np.array([0, 2], "<i8").tobytes()),
        "cuts a UTF-8 character",
    ),
    "offsets decrease": (
        edit_buffer(SOUND[1][0], "s", "offs", np.array([0, 7, 6], "<i8").tobytes()),
        "offsets decrease",
    ),
    "offsets do not span": (
        edit_buffer(SOUND[1][0], "s", "offs", np.array([1], "<i8").tobytes()),
        "offsets do not span",
    ),
    "JSON not JSON": (edit_buffer(SOUND[1][0], "j", "data", b"{x"), "not JSON texts"),
    "buffer past the end": (edit_body(SOUND[1][0], _past_the_end), "past the end"),
    # Same-shape edits: these bodies are read by position, not parsed (see below).
    "size not the rows'": (
        edit_bytes(SOUND[1][0], b'"row_ids":{"o":0,"n":24}', b'"row_ids":{"o":0,"n":32}'),
        "holds 32 bytes",
    ),
    "leading zero": (
        edit_bytes(SOUND[1][0], b'"row_timestamps":{"o":24,', b'"row_timestamps":{"o":04,'),
        "leading zero",
    ),
    "time range": (
        reseal(SOUND[1][0][:_BEGIN] + (150).to_bytes(8, "little") + SOUND[1][0][_BEGIN + 8 :]),
        "time range",
    ),
}


@pytest.mark.parametrize("case", list(BAD_BATCHES), ids=list(BAD_BATCHES))
def test_a_batch_with_a_bad_message_is_refused_as_decode_refuses_it(case: str) -> None:
    bad, needle = BAD_BATCHES[case]
    with pytest.raises(DecodeError, match=needle):  # decode() names the problem
        decode(bad)
    columns = InsertColumns(FrameSchema(ALL_TYPES, FrameKind.CHANGES))
    assert columns.offer(*SOUND[0]) and columns.offer(bad, "c") and columns.offer(*SOUND[2])
    with pytest.raises(BatchRefused):
        columns.build()


def _within_shape(run: bytes) -> list[bytes]:
    """Other numbers of as many digits as ``run``, one with a leading zero."""
    last = str((int(run[-1:]) + 1) % 10).encode()
    edits = [run[:-1] + last, b"9" * len(run)]
    if len(run) > 1:
        edits.append(b"0" + run[1:])
    return [edit for edit in edits if edit != run]


def test_any_number_edited_within_its_shape_builds_as_decode_or_is_refused() -> None:
    """Every number of a body changed to another of as many digits (a leading zero
    included), read by position behind a sound body of that shape: the batch either
    builds the rows decoding gives, or is refused where decoding fails."""
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    payload = SOUND[1][0]
    body_end = ENVELOPE_SIZE + _PREFIX.unpack_from(payload)[-1]
    edited = 0
    for match in re.finditer(rb"[0-9]+", payload[ENVELOPE_SIZE:body_end]):
        at = ENVELOPE_SIZE + match.start()
        for run in _within_shape(match.group()):
            bad = reseal(payload[:at] + run + payload[at + len(run) :])
            columns = InsertColumns(frame)
            assert columns.offer(*SOUND[0])
            if not columns.offer(bad, "c"):
                continue  # no rows, or a name: decoded one by one
            edited += 1
            try:
                table = columns.build()
            except BatchRefused:
                with pytest.raises(DecodeError):
                    decode(bad)
            else:
                assert table.equals(decoded_table(frame, [SOUND[0], (bad, "c")]))
    assert edited > 150


def test_a_body_edited_within_its_shape_is_read_by_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same-shape cases above reach :meth:`InsertColumns.build` unparsed (a parse
    would refuse the leading zero at once): the whole-batch checks catch them."""
    parsed = _counting_parses(monkeypatch)
    columns = InsertColumns(FrameSchema(ALL_TYPES, FrameKind.CHANGES))
    assert columns.offer(*SOUND[0])
    for case in ("size not the rows'", "leading zero"):
        assert columns.offer(BAD_BATCHES[case][0], "c")
    assert len(parsed) == 1


def test_nulls_in_a_required_field_are_refused() -> None:
    schema = CollectionSchema(
        "all",
        tuple(FieldSchema(f.name, f.dtype, f.is_primary, f.dim, False) for f in ALL_TYPES.fields),
    )
    columns = InsertColumns(FrameSchema(schema, FrameKind.INSERTS))
    assert columns.offer(*SOUND[0])
    with pytest.raises(BatchRefused, match="holds nulls"):
        columns.build()


async def test_a_slice_skips_a_bad_insert_and_delivers_the_others(tmp_path: Path) -> None:
    """A text that is not UTF-8 makes the batch fall back to decoding message by
    message: the bad one is logged and counted, the two good ones delivered."""
    from msgstream import TimeTickMsg, new_client

    config = rocksmq_config(tmp_path / "store")
    client = new_client(config)
    producer = await client.create_producer("ch")
    bad = BAD_BATCHES["text not UTF-8"][0]
    tick = encode(TimeTickMsg(msg_id=1, timestamp=1000))
    await producer.send_many([SOUND[0][0], bad, SOUND[2][0], tick])
    await client.close()
    reader = open_reader(config)
    stats = SkipStats()
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    tables = [
        t
        async for t in read_slice(
            reader.client, ChannelSlice("ch", None, 0, 1000), frame, "t", stats=stats
        )
    ]
    await reader.client.close()
    assert stats.undecodable == 1
    assert [t.column("pk").to_pylist() for t in tables] == [[1, 2, 3, 7, 8, 9]]
