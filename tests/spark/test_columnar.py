"""Insert payloads to Arrow in whole-batch passes: the same rows as decoding each message
into a FrameBuilder, and a refusal (so the caller decodes one by one) wherever decode()
would fail or the message does not fit the frame (no Spark)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

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
    envelope,
)
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema
from msgstream.bridge_spark.clients import open_reader
from msgstream.bridge_spark.columnar import BatchRefused, InsertColumns
from msgstream.bridge_spark.cursor import SkipStats
from msgstream.bridge_spark.slices import ChannelSlice, read_slice
from msgstream.codec import ENVELOPE_SIZE
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
        pytest.param(edit_body(SOUND[0][0], _past_the_end), id="buffer past the end"),
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
