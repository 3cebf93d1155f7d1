"""The wire codec: envelope, raw buffers, strict decoding, fuzzing."""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, ClassVar
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msgstream.errors import (
    CodecError,
    DecodeError,
    MsgStreamError,
    UnknownMessageTypeError,
    UnknownTypeCodeError,
)
from msgstream.wire import packed
from msgstream.wire.codec import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ENVELOPE_SIZE,
    MAGIC,
    VERSION,
    MessageRegistry,
    decode,
    encode,
    peek_header,
    to_jsonable,
)
from msgstream.wire.messages import (
    BUILTIN_TYPES,
    CreateCollectionMsg,
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    TimeTickMsg,
    TsMsg,
)
from msgstream.wire.packed import SMALL_COLUMN, PackedKind, PackedValues, pack, unpack, wire_parts
from msgstream.wire.position import MsgPosition
from msgstream.wire.schema import CollectionSchema, DataType, FieldData, FieldSchema

_PREFIX = struct.Struct("<2sBBHqQqQQI")  # the envelope up to (not including) the crc
_ENVELOPE = struct.Struct("<2sBBHqQqQQII")


def build_payload(
    msg_type: int,
    body: bytes,
    buffers: bytes = b"",
    *,
    msg_id: int = 1,
    timestamp: int = 100,
    source_id: int = 0,
    begin_ts: int | None = None,
    end_ts: int | None = None,
    magic: bytes = b"MS",
    version: int = VERSION,
    flags: int = 0,
    json_len: int | None = None,
) -> bytes:
    """A payload built by hand, with a correct checksum over envelope and body."""
    prefix = _PREFIX.pack(
        magic,
        version,
        flags,
        msg_type,
        msg_id,
        timestamp,
        source_id,
        timestamp if begin_ts is None else begin_ts,
        timestamp if end_ts is None else end_ts,
        len(body) if json_len is None else json_len,
    )
    tail = body + buffers
    return prefix + struct.pack("<I", zlib.crc32(prefix + tail)) + tail


def split_payload(payload: bytes) -> tuple[tuple[Any, ...], Any, bytes]:
    """``(envelope fields, JSON body, buffer area)`` of an encoded payload."""
    fields = _ENVELOPE.unpack_from(payload)
    json_len = fields[9]
    body = orjson.loads(payload[ENVELOPE_SIZE : ENVELOPE_SIZE + json_len])
    return fields, body, payload[ENVELOPE_SIZE + json_len :]


def rebuild(
    payload: bytes, body: Any, buffers: bytes | None = None, version: int | None = None
) -> bytes:
    """The same envelope with another body (and buffers, version), checksum fixed."""
    fields, _, area = split_payload(payload)
    return build_payload(
        fields[3],
        orjson.dumps(body),
        area if buffers is None else buffers,
        version=fields[1] if version is None else version,
        msg_id=fields[4],
        timestamp=fields[5],
        source_id=fields[6],
        begin_ts=fields[7],
        end_ts=fields[8],
    )


@dataclass(kw_only=True, eq=False, repr=False)
class NoteMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = 1002

    text: str
    blob: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)

    def encode_body(self, writer: Any) -> dict[str, Any]:
        return {"text": self.text, "blob": writer.add_bytes(self.blob), "extra": self.extra}

    @classmethod
    def decode_body(cls, header: Any, body: Any, reader: Any) -> NoteMsg:
        return cls(**header, text=body["text"], blob=reader.get_bytes(body["blob"]),
                   extra=body["extra"])  # fmt: skip


REGISTRY = MessageRegistry(BUILTIN_TYPES)
REGISTRY.register(NoteMsg)


def small_insert() -> InsertMsg:
    return InsertMsg(
        msg_id=7,
        timestamp=1000,
        source_id=2,
        collection_name="c",
        row_ids=[1, 2, 3],
        row_timestamps=[900, 1000, 950],
        fields=[
            FieldData("pk", DataType.INT64, [10, 20, 30]),
            FieldData("name", DataType.VARCHAR, ["a", None, "c"], valid=[1, 0, 1]),
            FieldData("blob", DataType.BINARY, [b"\x01", None, b""]),
            FieldData("meta", DataType.JSON, [{"k": 1}, [], None]),
            FieldData("vec", DataType.FLOAT_VECTOR, np.eye(3, 4, dtype=np.float32), dim=4),
        ],
    )


def schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        (
            FieldSchema("pk", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=4),
            FieldSchema("name", DataType.VARCHAR, nullable=True),
        ),
    )


def sample_messages() -> list[TsMsg]:
    return [
        TimeTickMsg(msg_id=1, timestamp=10, source_id=1),
        small_insert(),
        DeleteMsg(msg_id=3, timestamp=30, collection_name="c", primary_keys=[1, 2]),
        DeleteMsg(msg_id=4, timestamp=40, collection_name="c", primary_keys=["x", "yy"]),
        CreateCollectionMsg(msg_id=5, timestamp=50, collection_name="c", schema=schema()),
        DropCollectionMsg(msg_id=6, timestamp=60, collection_name="c", collection_id=9),
        CreatePartitionMsg(msg_id=7, timestamp=70, collection_name="c", partition_name="p"),
        DropPartitionMsg(msg_id=8, timestamp=80, collection_name="c", partition_name="p"),
        NoteMsg(msg_id=9, timestamp=90, text="hi", blob=b"\x00\xffraw", extra={"a": [1]}),
    ]


SAMPLES = sample_messages()
PAYLOADS = [encode(m, REGISTRY) for m in SAMPLES]
SAMPLE_IDS = [type(m).__name__ + str(m.msg_id) for m in SAMPLES]


# --------------------------------------------------------------------------- envelope


def test_envelope_layout() -> None:
    assert MAGIC == b"MS"
    assert VERSION == 3
    assert ENVELOPE_SIZE == 54
    msg = DropCollectionMsg(
        msg_id=-5, timestamp=2**64 - 1, source_id=2**63 - 1, collection_name="c"
    )
    payload = encode(msg)
    fields, body, area = split_payload(payload)
    magic, version, flags, msg_type, msg_id, ts, source, begin, end, json_len, crc = fields
    assert (magic, version, flags, msg_type) == (b"MS", 3, 0, 5)
    assert (begin, end) == (2**64 - 1, 2**64 - 1)
    assert (msg_id, ts, source) == (-5, 2**64 - 1, 2**63 - 1)
    assert json_len == len(payload) - ENVELOPE_SIZE
    assert body == {"collection_name": "c", "collection_id": 0}
    assert area == b""
    assert crc == zlib.crc32(payload[: ENVELOPE_SIZE - 4] + payload[ENVELOPE_SIZE:])
    assert peek_header(payload) == (5, -5, 2**64 - 1, 2**63 - 1)
    assert build_payload(5, orjson.dumps(body), msg_id=-5, timestamp=2**64 - 1,
                         source_id=2**63 - 1) == payload  # fmt: skip


@pytest.mark.parametrize("msg", SAMPLES, ids=SAMPLE_IDS)
def test_size_set_on_encode_and_decode(msg: TsMsg) -> None:
    msg.size = 0
    payload = encode(msg, REGISTRY)
    assert isinstance(payload, bytes)
    assert msg.size == len(payload)
    back = decode(payload, REGISTRY)
    assert back.size == len(payload)
    assert back == msg
    assert encode(back, REGISTRY) == payload  # deterministic


def test_decode_accepts_bytearray_and_memoryview() -> None:
    payload = PAYLOADS[1]
    assert decode(bytearray(payload), REGISTRY) == SAMPLES[1]
    assert decode(memoryview(payload), REGISTRY) == SAMPLES[1]


# --------------------------------------------------------------------------- raw buffers


def test_vectors_travel_as_raw_float32() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((1000, 128)).astype(np.float32)
    msg = InsertMsg(
        msg_id=1,
        timestamp=5,
        collection_name="c",
        row_ids=np.arange(1000),
        fields=[FieldData("vec", DataType.FLOAT_VECTOR, vectors, dim=128)],
    )
    payload = encode(msg)
    raw = 1000 * 128 * 4
    assert raw == 512_000
    ids_and_ts = 1000 * 8 * 2
    assert raw + ids_and_ts < len(payload) < raw + ids_and_ts + 600
    assert vectors.astype("<f4").tobytes() in payload
    _, body, area = split_payload(payload)
    assert len(area) == raw + ids_and_ts
    assert body["fields"][0]["buf"] == {"o": ids_and_ts, "n": raw}
    assert body["fields"][0]["dim"] == 128
    assert "values" not in body["fields"][0]
    back = decode(payload)
    assert isinstance(back, InsertMsg)
    column = back.field("vec").values
    assert isinstance(column, np.ndarray)
    assert column.dtype == np.float32
    assert column.shape == (1000, 128)
    assert np.array_equal(column, vectors)
    assert back == msg


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (DataType.BOOL, [True, False] * 50),
        (DataType.INT8, list(range(-50, 50))),
        (DataType.INT16, list(range(100))),
        (DataType.INT32, list(range(100))),
        (DataType.INT64, list(range(2**40, 2**40 + 100))),
        (DataType.FLOAT, [i / 3 for i in range(100)]),
        (DataType.DOUBLE, [i / 7 for i in range(100)]),
    ],
)
def test_numeric_columns_travel_as_raw_buffers(dtype: DataType, values: list[Any]) -> None:
    assert dtype.numpy_dtype is not None
    msg = InsertMsg(
        timestamp=1, collection_name="c", row_ids=range(100), fields=[FieldData("x", dtype, values)]
    )
    payload = encode(msg)
    expected = np.asarray(values, dtype=dtype.numpy_dtype).tobytes()
    assert expected in payload
    _, body, area = split_payload(payload)
    ref = body["fields"][0]["buf"]
    assert area[ref["o"] : ref["o"] + ref["n"]] == expected
    assert set(body["fields"][0]) == {"name", "dtype", "rows", "buf"}
    assert body["row_ids"] == {"o": 0, "n": 800}
    assert body["row_timestamps"] == {"o": 800, "n": 800}
    back = decode(payload)
    assert isinstance(back, InsertMsg)
    column = back.field("x").values
    assert isinstance(column, np.ndarray)
    assert column.dtype == np.dtype(dtype.numpy_dtype)
    assert column.tolist() == np.asarray(values, dtype=dtype.numpy_dtype).tolist()


def test_int_delete_keys_are_raw() -> None:
    keys = np.arange(2**50, 2**50 + 64, dtype=np.int64)
    payload = encode(DeleteMsg(timestamp=1, collection_name="c", primary_keys=keys))
    assert keys.astype("<i8").tobytes() in payload
    _, body, _ = split_payload(payload)
    assert body["int_keys"] == {"o": 512, "n": 512}
    assert "str_keys" not in body


@pytest.mark.parametrize("rows", [0, 1, 3, 63, 64, 200])
@pytest.mark.parametrize("stamps", ["default", "uniform", "varied", "strided", "big-endian"])
def test_row_timestamps_are_written_the_same_whichever_way_they_were_given(
    rows: int, stamps: str
) -> None:
    """Small messages whose rows share a timestamp skip the array when encoding: the bytes
    must be those of the array, and the envelope range its min and max."""
    given: Any = None
    if stamps == "uniform":
        given = np.full(rows, 77, dtype=np.uint64)
    elif stamps == "varied":
        given = np.arange(1000, 1000 + rows, dtype=np.uint64)[::-1].copy()
    elif stamps == "strided":
        given = np.arange(2 * rows, dtype=np.uint64)[::2] + 5
    elif stamps == "big-endian":
        given = np.arange(rows, dtype=">u8") + 9
    msg = DeleteMsg(
        msg_id=1,
        timestamp=77,
        collection_name="c",
        primary_keys=list(range(rows)),
        row_timestamps=given,
    )
    expected = np.asarray(msg.row_timestamps, dtype="<u8")
    payload = encode(msg)
    header, body, area = split_payload(payload)
    ref = body["row_timestamps"]
    assert area[ref["o"] : ref["o"] + ref["n"]] == expected.tobytes()
    begin, end = (int(expected.min()), int(expected.max())) if rows else (77, 77)
    assert (header[7], header[8]) == (begin, end)  # the envelope's begin_ts, end_ts
    decoded = decode(payload)
    assert isinstance(decoded, DeleteMsg)
    assert decoded.timestamps.tolist() == expected.tolist()
    assert encode(decoded) == payload


# --------------------------------------------------------------------------- strict decoding


@pytest.mark.parametrize("index", range(len(PAYLOADS)), ids=SAMPLE_IDS)
def test_every_truncation_is_a_decode_error(index: int) -> None:
    payload = PAYLOADS[index]
    lengths = range(len(payload))
    if len(payload) > 400:
        lengths = range(0, len(payload), 3)  # sampled: every third prefix
    for n in lengths:
        with pytest.raises(DecodeError):
            decode(payload[:n], REGISTRY)


def test_short_payload_messages() -> None:
    with pytest.raises(DecodeError, match="payload of 0 bytes is shorter than the envelope"):
        decode(b"")
    with pytest.raises(DecodeError, match="payload of 37 bytes is shorter than the envelope"):
        decode(PAYLOADS[0][:37])
    with pytest.raises(DecodeError, match="shorter than the envelope"):
        peek_header(b"MS")
    full = PAYLOADS[5]
    with pytest.raises(DecodeError, match=r"body of \d+ bytes announced, 1 present \(truncated\)"):
        decode(full[: ENVELOPE_SIZE + 1])
    with pytest.raises(DecodeError, match="checksum mismatch"):
        decode(PAYLOADS[1][:-1])  # cut inside the side buffers


@pytest.mark.parametrize("index", range(len(PAYLOADS)), ids=SAMPLE_IDS)
def test_every_flipped_byte_is_a_decode_error(index: int) -> None:
    payload = PAYLOADS[index]
    positions = range(len(payload))
    if len(payload) > 400:
        positions = range(0, len(payload), 5)
    for i in positions:
        for mask in (0x01, 0x80, 0xFF):
            corrupt = bytearray(payload)
            corrupt[i] ^= mask
            with pytest.raises(DecodeError):
                decode(bytes(corrupt), REGISTRY)


def test_flipped_header_field_is_caught_by_checksum() -> None:
    payload = bytearray(PAYLOADS[5])
    payload[12] ^= 0x01  # lowest byte of the timestamp
    with pytest.raises(DecodeError, match="checksum mismatch"):
        decode(bytes(payload))
    payload = bytearray(PAYLOADS[5])
    payload[3] = 1  # flags
    with pytest.raises(DecodeError, match="checksum mismatch"):
        decode(bytes(payload))


def test_bad_magic_and_version() -> None:
    good = PAYLOADS[0]
    with pytest.raises(DecodeError, match=r"bad magic b'XS' \(not a msgstream payload\)"):
        decode(b"XS" + good[2:])
    with pytest.raises(DecodeError, match="unsupported codec version 4"):
        decode(good[:2] + b"\x04" + good[3:])
    with pytest.raises(DecodeError, match="unsupported codec version 1"):
        decode(good[:2] + b"\x01" + good[3:])
    # even with a correct checksum
    with pytest.raises(DecodeError, match="bad magic"):
        decode(build_payload(1, b"{}", magic=b"ZZ"))
    with pytest.raises(DecodeError, match="unsupported codec version 0"):
        decode(build_payload(1, b"{}", version=0))
    with pytest.raises(DecodeError, match="bad magic"):
        peek_header(b"\x00" * ENVELOPE_SIZE)


def test_oversized_payload() -> None:
    payload = PAYLOADS[1]
    assert decode(payload, REGISTRY, max_bytes=len(payload)) == SAMPLES[1]
    with pytest.raises(
        DecodeError,
        match=f"payload of {len(payload)} bytes exceeds the limit of {len(payload) - 1}",
    ):
        decode(payload, REGISTRY, max_bytes=len(payload) - 1)
    assert DEFAULT_MAX_MESSAGE_BYTES == 64 * 1024 * 1024


def test_hand_built_payload_decodes() -> None:
    payload = build_payload(
        5, b'{"collection_name": "c", "collection_id": 3}', msg_id=4, timestamp=9, source_id=1
    )
    assert decode(payload) == DropCollectionMsg(
        msg_id=4, timestamp=9, source_id=1, collection_name="c", collection_id=3
    )
    assert decode(build_payload(1, b"{}", timestamp=77)) == TimeTickMsg(msg_id=1, timestamp=77)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b"{", b'{"a": 1} trailing', b"\xff\xfe", b"[1, 2", b"nan", b"{'a': 1}"],
)
def test_body_garbage_with_correct_checksum(body: bytes) -> None:
    with pytest.raises(DecodeError, match="TimeTickMsg body is not valid JSON"):
        decode(build_payload(1, body))


@pytest.mark.parametrize("msg_type", range(1, 8))
@pytest.mark.parametrize("body", [b"[]", b'"text"', b"null", b"3", b"{}", b'{"x": 1}', b"[{}]"])
def test_body_of_wrong_shape(msg_type: int, body: bytes) -> None:
    if msg_type == 1 and body == b"{}":
        return  # a time tick's body is empty
    with pytest.raises(DecodeError):
        decode(build_payload(msg_type, body))


def _insert_body(**changes: Any) -> dict[str, Any]:
    _, body, _ = split_payload(encode(small_insert()))
    body.update(changes)
    return body


def _insert_field(column_name: str, /, **changes: Any) -> dict[str, Any]:
    body = _insert_body()
    for column in body["fields"]:
        if column["name"] == column_name:
            column.update(changes)
    return body


BAD_INSERT_BODIES: dict[str, tuple[dict[str, Any], str]] = {
    "row_ids past the end": (_insert_body(row_ids={"o": 0, "n": 10**6}), "lies past the end"),
    "row_ids offset past the end": (_insert_body(row_ids={"o": 10**6, "n": 24}), "past the end"),
    "row_ids wrong size": (_insert_body(row_ids={"o": 0, "n": 16}), "buffer holds 16 bytes"),
    "negative offset": (_insert_body(row_ids={"o": -8, "n": 24}), "malformed buffer reference"),
    "string ref": (_insert_body(row_ids="AAAA"), "buffer reference must be an object"),
    "list ref": (_insert_body(row_timestamps=[0, 24]), "buffer reference must be an object"),
    "float ref": (_insert_body(row_ids={"o": 0.0, "n": 24}), "malformed buffer reference"),
    "missing ref": (_insert_body(row_ids={"o": 0}), "malformed buffer reference"),
    "rows too many": (_insert_body(rows=4), "expected 4 x 8"),
    "rows negative": (_insert_body(rows=-3), "InsertMsg"),
    "rows string": (_insert_body(rows="3"), "InsertMsg"),
    "rows float": (_insert_body(rows=3.0), "InsertMsg"),
    "rows null": (_insert_body(rows=None), "InsertMsg"),
    "no fields key": ({k: v for k, v in _insert_body().items() if k != "fields"}, "InsertMsg"),
    "fields not a list": (_insert_body(fields=5), "InsertMsg"),
    "fields a string": (_insert_body(fields="abc"), "InsertMsg"),
    "field not an object": (_insert_body(fields=[1]), "InsertMsg"),
    "unknown dtype": (_insert_field("pk", dtype="int128"), "InsertMsg"),
    "vector buffer past end": (_insert_field("vec", buf={"o": 0, "n": 10**7}), "past the end"),
    "vector wrong dim": (_insert_field("vec", dim=5), "expected 15 x 4"),
    "vector zero dim": (_insert_field("vec", dim=0), "InsertMsg"),
    "vector negative dim": (_insert_field("vec", dim=-4), "InsertMsg"),
    "vector string dim": (_insert_field("vec", dim="4"), "InsertMsg"),
    "vector no dim": (_insert_field("vec", dim=None), "InsertMsg"),
    "int column with dim": (_insert_field("pk", dim=1), "InsertMsg"),
    "field rows mismatch": (_insert_field("pk", rows=2), "expected 2 x 8"),
    "text offsets short of the buffer": (_insert_field("name", data={"o": 0, "n": 1}), "span"),
    "text offsets wrong count": (_insert_field("name", offs={"o": 0, "n": 16}), "expected 4 x 8"),
    "text nulls wrong size": (_insert_field("name", nulls={"o": 0, "n": 2}), "expected 3 x 1"),
    "json data past the end": (_insert_field("meta", data={"o": 0, "n": 10**6}), "past the end"),
    "binary offsets past end": (_insert_field("blob", offs={"o": 10**6, "n": 32}), "past the end"),
    "name missing": (_insert_body(collection_name=None) | {"fields": [{}]}, "InsertMsg"),
}


@pytest.mark.parametrize("case", list(BAD_INSERT_BODIES))
def test_bad_insert_bodies(case: str) -> None:
    body, needle = BAD_INSERT_BODIES[case]
    payload = rebuild(encode(small_insert()), body)
    with pytest.raises(DecodeError) as info:
        decode(payload)
    assert needle in str(info.value)


def _inline(changes: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], bytes]:
    """small_insert() as codec version 2 wrote it: varchar and JSON values inline in the
    body, binary as lengths and one buffer (None rows listed); ``changes`` per column."""
    _, body, area = split_payload(encode(small_insert()))
    lens = np.array([1, 0, 0], "<i8").tobytes()
    inline: dict[str, dict[str, Any]] = {
        "name": {"values": ["a", None, "c"]},
        "meta": {"values": [{"k": 1}, [], None]},
        "blob": {"lens": {"o": len(area), "n": 24}, "buf": {"o": len(area) + 24, "n": 1},
                 "nulls": [1]},
    }  # fmt: skip
    for column in body["fields"]:
        name = column["name"]
        if name in inline:
            for key in ("offs", "data", "nulls"):
                column.pop(key, None)
            column.update(inline[name], **changes.get(name, {}))
    return body, area + lens + b"\x01"


def test_version_2_bodies_still_decode() -> None:
    body, area = _inline({})
    payload = rebuild(encode(small_insert()), body, area, version=2)
    assert payload[2] == 2
    assert decode(payload) == small_insert()


BAD_INLINE_BODIES: dict[str, tuple[dict[str, dict[str, Any]], str]] = {
    "varchar not a list": ({"name": {"values": "abc"}}, "expected a list of 3 values"),
    "varchar wrong count": ({"name": {"values": ["a"]}}, "expected a list of 3 values"),
    "varchar non-str": ({"name": {"values": ["a", 1, "c"]}}, "expected str"),
    "json wrong count": ({"meta": {"values": []}}, "expected a list of 3 values"),
    "binary lens past end": ({"blob": {"lens": {"o": 10**6, "n": 24}}}, "past the end"),
    "binary lens don't match": ({"blob": {"lens": {"o": 0, "n": 24}}}, "binary field"),
    "binary null out of range": ({"blob": {"nulls": [7]}}, "bad null row indices"),
    "binary null negative": ({"blob": {"nulls": [-1]}}, "bad null row indices"),
    "binary null not int": ({"blob": {"nulls": ["1"]}}, "bad null row indices"),
    "binary nulls not a list": ({"blob": {"nulls": 5}}, "bad null row indices"),
}


@pytest.mark.parametrize("case", list(BAD_INLINE_BODIES))
def test_bad_version_2_bodies(case: str) -> None:
    changes, needle = BAD_INLINE_BODIES[case]
    body, area = _inline(changes)
    with pytest.raises(DecodeError) as info:
        decode(rebuild(encode(small_insert()), body, area, version=2))
    assert needle in str(info.value)


def _packed_text(offsets: list[int], data: bytes) -> bytes:
    """A one-column Insert of three varchar rows with the given packed layout."""
    ids = np.arange(3, dtype="<i8").tobytes() + np.zeros(3, "<u8").tobytes()
    offs = np.array(offsets, "<i8").tobytes()
    body = {
        "collection_name": "c", "partition_name": "p", "rows": 3,
        "row_ids": {"o": 0, "n": 24}, "row_timestamps": {"o": 24, "n": 24},
        "fields": [{"name": "t", "dtype": "varchar", "rows": 3, "offs": {"o": 48, "n": 32},
                    "data": {"o": 80, "n": len(data)}}],
    }  # fmt: skip
    return build_payload(2, orjson.dumps(body), ids + offs + data, timestamp=0)


def test_packed_text_decodes_lazily_and_equals_its_list() -> None:
    msg = decode(_packed_text([0, 3, 3, 6], "héllo".encode()))
    assert isinstance(msg, InsertMsg)
    values = msg.fields[0].values
    assert isinstance(values, PackedValues)
    assert values == ["hé", "", "llo"] and values == ["hé", "", "llo"]
    assert len(values) == 3 and values[0] == "hé" and list(values) == ["hé", "", "llo"]


@pytest.mark.parametrize(
    ("offsets", "data", "needle"),
    [
        ([0, 1, 2, 4], b"abc", "offsets do not span"),
        ([1, 1, 2, 3], b"abc", "offsets do not span"),
        ([0, 2, 1, 3], b"abc", "offsets decrease"),
        ([0, 1, 2, 3], b"a\xffc", "not UTF-8"),
        ([0, 1, 1, 3], "éa".encode(), "cuts a UTF-8 character"),
    ],
)
def test_bad_packed_text(offsets: list[int], data: bytes, needle: str) -> None:
    with pytest.raises(DecodeError, match=needle):
        decode(_packed_text(offsets, data))


@pytest.mark.parametrize(
    ("offsets", "data", "needle"),
    [
        ([0, 1, 3], b"1{x", "not JSON texts"),
        ([0, 1, 1], b"1", "not JSON texts"),
        ([0, 3, 5, 7], b"1,2[34]", "one JSON text per row"),
        ([0, 2, 4], b"[12]", "one JSON text per row"),
    ],
)
def test_bad_packed_json(offsets: list[int], data: bytes, needle: str) -> None:
    with pytest.raises(DecodeError, match=needle):
        unpack(PackedKind.JSON, np.array(offsets), memoryview(data), None, "f")


_DEEP = 1024  # orjson's and simdjson's nesting limit


@pytest.mark.parametrize(
    ("row", "taken"),
    [
        (b"\xef\xbb\xbf1", False),  # simdjson skips a byte order mark, orjson refuses it
        (b" \xef\xbb\xbf", False),
        (b'"\xef\xbb\xbf"', True),  # in a string it is a character
        (b"18446744073709551616", True),  # simdjson refuses beyond 64 bits, orjson takes
        (b"-" + b"9" * 40, True),
        (b"1e309", False),  # beyond a double
        (b"1" + b"0" * 400, False),
        (b"1e-400", True),
        (b'"\\ud800"', False),  # a lone surrogate
        (b'"\xed\xa0\x80"', False),  # a surrogate in UTF-8
        (b'"\xc0\x80"', False),  # overlong UTF-8
        (b'"a\x01"', False),  # a control character in a string
        (b"NaN", False),
        (b' [1, {"a": null}]\n', True),
        (b"[" * _DEEP + b"]" * _DEEP, True),
        (b"[" * (_DEEP + 1) + b"]" * (_DEEP + 1), False),
    ],
)
def test_packed_json_takes_what_orjson_takes(row: bytes, taken: bool) -> None:
    """Rows are validated by simdjson, and by orjson where they differ: the verdict is
    orjson's, row by row, beside valid rows or alone."""
    assert _orjson_takes([row]) is taken
    for rows in ([row], [b"1", row, b'{"k": [2]}']):
        offsets = np.cumsum([0, *map(len, rows)])
        data = memoryview(b"".join(rows))
        if taken:  # (types, not values: comparing the deepest lists exceeds Python's stack)
            column = unpack(PackedKind.JSON, offsets, data, None, "f")
            assert list(map(type, column)) == [type(orjson.loads(row)) for row in rows]
        else:
            with pytest.raises(DecodeError, match=r"^f: the rows are not JSON texts"):
                unpack(PackedKind.JSON, offsets, data, None, "f")


def _orjson_takes(rows: list[bytes]) -> bool:
    try:
        for row in rows:
            orjson.loads(row)
    except orjson.JSONDecodeError:
        return False
    return True


_JSON_BITS = [
    b"1", b"-0", b"2.5e3", b"1e309", b"18446744073709551616", b"true", b"nul", b'"a"', b'"',
    b"\\", b'"\\u00e9"', b'"\\ud800"', b"\xff", b"\xef\xbb\xbf", b"\xc3\xa9", b"\x00",
    b"\x01", b" ", b"\n", b"\x0c", b"[", b"]", b"{", b"}", b",", b":", b'"k":', b"NaN", b"01",
    b".5", b"+1",
]  # fmt: skip


def _json_rows(max_size: int, *extra: bytes) -> st.SearchStrategy[list[bytes]]:
    """Lists of rows: bits of JSON put together, or whole texts (and ``extra``)."""
    whole = [b"null", b'{"a": [1, "x,]"]}', b'"\\""', *extra]
    bits = st.lists(st.sampled_from(_JSON_BITS), max_size=5).map(b"".join)
    return st.lists(st.one_of(bits, st.sampled_from(whole)), min_size=1, max_size=max_size)


def _column_taken(rows: list[bytes]) -> bool:
    """Whether ``unpack`` takes ``rows`` as a JSON column."""
    offsets = np.cumsum([0, *map(len, rows)])
    try:
        unpack(PackedKind.JSON, offsets, memoryview(b"".join(rows)), None, "f")
    except DecodeError:
        return False
    return True


@given(_json_rows(6))
@settings(max_examples=400, deadline=None)
def test_packed_json_verdict_is_orjsons_row_by_row(rows: list[bytes]) -> None:
    assert _column_taken(rows) is _orjson_takes(rows)


_DEEPEST = b"[" * _DEEP + b"]" * _DEEP
_JOINED = {True: (0.0, 0.0), False: (float("inf"), float("inf"))}
"""Costs that make check_json validate joined runs of rows always, or never."""


@given(rows=_json_rows(12, _DEEPEST), run_bytes=st.integers(1, 24), joined=st.booleans())
@settings(max_examples=500, deadline=None)
def test_packed_json_verdict_holds_joined_or_row_by_row(
    rows: list[bytes], run_bytes: int, joined: bool
) -> None:
    """Rows go to simdjson joined in runs of about ``RUN_BYTES``, or one by one: whichever
    way, wherever the runs are cut (and with a row at the deepest nesting allowed beside
    others), the verdict is ``orjson``'s, row by row."""
    with (
        mock.patch.object(packed, "RUN_BYTES", run_bytes),
        mock.patch.object(packed, "JOINED_NS", _JOINED[joined]),
    ):
        taken = _column_taken(rows)
    assert taken is _orjson_takes(rows)


@pytest.mark.parametrize("joined", [True, False])
def test_packed_json_rows_that_only_join_into_json_are_refused(joined: bool) -> None:
    """Rows that are JSON only together (a value cut in two, two values in one row) are
    refused, as are an empty row and one of blanks, alone or beside others."""
    for rows in ([b"[1", b"2]"], [b'{"a": 1', b'"b": 2}', b"1,2"], [b"1,2", b"3"],
                 [b'"a', b'b"'], [b""], [b" "], [b"1", b"", b"2"], [b"1", b" "]):  # fmt: skip
        offsets = np.cumsum([0, *map(len, rows)])
        with (
            mock.patch.object(packed, "JOINED_NS", _JOINED[joined]),
            pytest.raises(DecodeError, match=r"^f: the (rows are not JSON texts|offsets)"),
        ):
            unpack(PackedKind.JSON, offsets, memoryview(b"".join(rows)), None, "f")


def test_packed_json_round_trips() -> None:
    values = [{"a": [1, "x,]"]}, None, 's\\"', 3.5, []]
    packed = pack(PackedKind.JSON, values)
    column = unpack(PackedKind.JSON, packed.offsets, memoryview(packed.data), None, "f")
    assert column == values


_WIRE_VALUES = {
    PackedKind.BINARY: st.one_of(st.none(), st.binary(max_size=12)),
    PackedKind.TEXT: st.one_of(st.none(), st.text(max_size=6)),
    PackedKind.JSON: st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=4)),
}


@given(data=st.data(), kind=st.sampled_from(list(PackedKind)),
       rows=st.sampled_from([0, 1, 2, 5, SMALL_COLUMN - 1, SMALL_COLUMN, SMALL_COLUMN + 3]),
       as_tuple=st.booleans())  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_wire_parts_are_the_packed_columns_bytes(
    data: st.DataObject, kind: PackedKind, rows: int, as_tuple: bool
) -> None:
    """The encoder's path for small columns (no arrays) writes what ``pack`` packs, on
    both sides of the size limit, with and without nulls, from a list or a tuple."""
    values: Any = data.draw(st.lists(_WIRE_VALUES[kind], min_size=rows, max_size=rows))
    if as_tuple:
        values = tuple(values)
    offsets, body, nulls = wire_parts(kind, values)
    packed = pack(kind, values)
    assert bytes(offsets) == packed.offsets.astype("<i8").tobytes()
    assert bytes(body) == bytes(packed.data)
    if packed.nulls is None:
        assert nulls is None
    else:
        assert nulls is not None and nulls.tolist() == packed.nulls.tolist()
    again = unpack(kind, np.frombuffer(bytes(offsets), "<i8"), memoryview(bytes(body)), nulls, "f")
    assert again == list(values)


@pytest.mark.parametrize("rows", [1, 3, SMALL_COLUMN + 1])
def test_text_that_is_not_utf8_encodable_is_named_whatever_the_columns_size(rows: int) -> None:
    column = FieldData("f", DataType.VARCHAR, ["ok", "\ud800"] * rows)
    msg = InsertMsg(
        msg_id=1,
        timestamp=1,
        source_id=1,
        hash_keys=[0] * 2 * rows,
        collection_name="c",
        row_ids=list(range(2 * rows)),
        fields=[column],
    )
    with pytest.raises(CodecError, match=re.escape("field 'f': 'utf-8' codec can't encode")):
        encode(msg)


def test_binary_lengths_that_overflow_are_rejected() -> None:
    # four lengths of 2**62 sum to 2**64, which wraps to 0 in int64 arithmetic
    lens = np.full(4, 2**62, dtype="<i8").tobytes()
    ts = np.zeros(4, dtype="<u8").tobytes()
    ids = np.arange(4, dtype="<i8").tobytes()
    body = {
        "collection_name": "c",
        "partition_name": "p",
        "rows": 4,
        "row_ids": {"o": 0, "n": 32},
        "row_timestamps": {"o": 32, "n": 32},
        "fields": [
            {"name": "b", "dtype": "binary", "rows": 4, "lens": {"o": 64, "n": 32},
             "buf": {"o": 96, "n": 0}},
        ],
    }  # fmt: skip
    payload = build_payload(2, orjson.dumps(body), ids + ts + lens)
    with pytest.raises(DecodeError, match="binary field 'b': lengths do not match its buffer"):
        decode(payload)


BAD_DELETE_BODIES: dict[str, dict[str, Any]] = {
    "str keys not a list": {"str_keys": "ab"},
    "str keys wrong count": {"str_keys": ["a"]},
    "str keys ints": {"str_keys": [1, 2]},
    "str keys huge int": {"str_keys": [2**64 - 1, 2**63]},
    "str keys mixed": {"str_keys": ["a", 1]},
    "str keys nested": {"str_keys": [["a"], ["b"]]},
    "no keys": {},
    "int keys wrong size": {"int_keys": {"o": 0, "n": 8}},
    "int keys past end": {"int_keys": {"o": 8, "n": 16}},
}


@pytest.mark.parametrize("case", list(BAD_DELETE_BODIES))
def test_bad_delete_bodies(case: str) -> None:
    body = {
        "collection_name": "c",
        "partition_name": "p",
        "rows": 2,
        "row_timestamps": {"o": 0, "n": 16},
        **BAD_DELETE_BODIES[case],
    }
    payload = build_payload(3, orjson.dumps(body), np.arange(2, dtype="<u8").tobytes())
    with pytest.raises(DecodeError, match="DeleteMsg"):
        decode(payload)


@pytest.mark.parametrize(
    "schema_json",
    [
        None,
        [],
        {"name": "c"},
        {"name": "c", "fields": [{"name": "v", "dtype": "float_vector"}]},
        {"name": "c", "fields": [{"name": "v", "dtype": "float_vector", "dim": "8"}]},
        {"name": "c", "fields": [{"name": "k", "dtype": "float", "is_primary": True}]},
        {"name": "c", "fields": [{"name": "a", "dtype": "bool"}, {"name": "a", "dtype": "bool"}]},
        {"name": "c", "fields": [{"name": "", "dtype": "bool"}]},
        {"name": "c", "fields": [{"dtype": "bool"}]},
        {"name": "c", "fields": [{"name": "x", "dtype": "nope"}]},
        {"name": "c", "fields": [5]},
    ],
)
def test_bad_create_collection_bodies(schema_json: Any) -> None:
    body = {"collection_name": "c", "collection_id": 1, "schema": schema_json}
    with pytest.raises(DecodeError, match="CreateCollectionMsg"):
        decode(build_payload(4, orjson.dumps(body)))


@pytest.mark.parametrize(
    ("msg_type", "body", "needle"),
    [
        (2, _insert_body(collection_name=["c"]), "InsertMsg: field 'collection_name' must be str"),
        (2, _insert_body(partition_name=5), "field 'partition_name' must be str, got int"),
        (2, _insert_field("pk", name=["pk"]), "field name must be a string, got ['pk']"),
        (2, _insert_field("vec", name=None), "field name must be a string, got None"),
        (3, {"collection_name": 1, "rows": 0}, "DeleteMsg: field 'collection_name' must be str"),
        (4, {"collection_name": "c", "collection_id": "1"}, "field 'collection_id' must be int"),
        (4, {"collection_name": "c", "collection_id": True}, "must be int, got bool"),
        (5, {"collection_name": {}}, "DropCollectionMsg: field 'collection_name' must be str"),
        (
            5,
            {"collection_name": "c", "collection_id": 1.5},
            "'collection_id' must be int, got float",
        ),
        (6, {"collection_name": "c", "partition_name": None}, "CreatePartitionMsg: field 'partiti"),
        (7, {"collection_name": 0, "partition_name": "p"}, "DropPartitionMsg: field 'collection_"),
    ],
)
def test_scalar_fields_have_their_types(msg_type: int, body: Any, needle: str) -> None:
    buffers = split_payload(encode(small_insert()))[2] if msg_type == 2 else b""
    with pytest.raises(DecodeError) as info:
        decode(build_payload(msg_type, orjson.dumps(body), buffers), REGISTRY)
    assert needle in str(info.value)


def test_header_keys_in_a_body_are_rejected() -> None:
    for key, value in [("msg_id", 5), ("timestamp", 1), ("hash_keys", [1]), ("position", None)]:
        body = {"collection_name": "c", "collection_id": 1, key: value}
        with pytest.raises(DecodeError, match="DropCollectionMsg"):
            decode(build_payload(5, orjson.dumps(body)))


@pytest.mark.parametrize("code", [0, 8, 999, 1001, 65535])
def test_unknown_type_code(code: int) -> None:
    payload = build_payload(code, b"{}", msg_id=42)
    with pytest.raises(UnknownMessageTypeError) as info:
        decode(payload)
    assert info.value.type_code == code
    assert f"unknown message type {code} (msg_id=42)" == str(info.value)
    # From bytes, an unknown code is a DecodeError like any other bad payload (fuzzing:
    # decode raises nothing else), and still an UnknownMessageTypeError for readers that
    # count payloads of types they lack apart from damaged ones.
    assert type(info.value) is UnknownTypeCodeError
    assert isinstance(info.value, DecodeError)


def test_checksum_is_checked_before_the_type() -> None:
    payload = bytearray(build_payload(999, b"{}"))
    payload[-1] ^= 1
    with pytest.raises(DecodeError, match="checksum mismatch"):
        decode(bytes(payload))


# --------------------------------------------------------------------------- encode errors


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ({"timestamp": 2**64}, "timestamp"),
        ({"timestamp": -1}, "timestamp"),
        ({"msg_id": 2**63}, "msg_id"),
        ({"source_id": -(2**63) - 1}, "source_id"),
    ],
)
def test_encode_header_out_of_range(header: dict[str, int], needle: str) -> None:
    msg = DropCollectionMsg(collection_name="c", **header)
    with pytest.raises(CodecError, match="DropCollectionMsg") as info:
        encode(msg)
    assert needle in str(info.value)


def test_encode_unserialisable_body() -> None:
    @dataclass(kw_only=True, eq=False, repr=False)
    class SetMsg(TsMsg):
        MSG_TYPE: ClassVar[int] = 1003
        items: set[int]

    registry = MessageRegistry(BUILTIN_TYPES)
    registry.register(SetMsg)
    with pytest.raises(CodecError, match="SetMsg"):
        encode(SetMsg(msg_id=3, items={1, 2}), registry)


# --------------------------------------------------------------------------- to_jsonable


def test_to_jsonable_every_type() -> None:
    for msg in sample_messages():
        view = to_jsonable(msg)
        text = orjson.dumps(view)
        assert orjson.loads(text) == view
        assert view["type"] == type(msg).__name__
        assert (view["msg_id"], view["timestamp"], view["source_id"]) == (
            msg.msg_id,
            msg.timestamp,
            msg.source_id,
        )
        assert "hash_keys" not in view
        assert "size" not in view
        assert "position" not in view


def test_to_jsonable_values() -> None:
    assert to_jsonable(
        DropCollectionMsg(msg_id=1, timestamp=2, source_id=3, collection_name="c")
    ) == {
        "type": "DropCollectionMsg",
        "msg_id": 1,
        "timestamp": 2,
        "source_id": 3,
        "collection_name": "c",
        "collection_id": 0,
    }
    view = to_jsonable(small_insert())
    assert view["collection_name"] == "c"
    assert view["partition_name"] == "_default"
    assert view["row_ids"] == [1, 2, 3]
    assert view["row_timestamps"] == [900, 1000, 950]
    assert view["fields"] == {
        "pk": [10, 20, 30],
        "name": ["a", None, "c"],
        "blob": ["AQ==", None, ""],
        "meta": [{"k": 1}, [], None],
        "vec": [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]],
    }
    strs = to_jsonable(DeleteMsg(collection_name="c", primary_keys=["a"], timestamp=4))
    assert strs["primary_keys"] == ["a"]
    assert strs["row_timestamps"] == [4]
    ints = to_jsonable(DeleteMsg(timestamp=1, collection_name="c", primary_keys=[7, 8]))
    assert ints["primary_keys"] == [7, 8]
    create = to_jsonable(CreateCollectionMsg(collection_name="c", schema=schema()))
    assert create["schema"] == schema().to_dict()
    note = to_jsonable(NoteMsg(text="t", blob=b"\x00\xff", extra={"k": [1]}))
    assert note["blob"] == "AP8="
    assert note["extra"] == {"k": [1]}
    for jsonable in (view, strs, ints, create, note):
        orjson.dumps(jsonable)


def test_to_jsonable_includes_position() -> None:
    msg = decode(PAYLOADS[0], REGISTRY)
    msg.position = MsgPosition("ch", b"\x01\x02", "sub", 10)
    view = to_jsonable(msg)
    assert view["position"] == {
        "channel": "ch",
        "msg_id": "AQI=",
        "msg_group": "sub",
        "timestamp": 10,
    }
    orjson.dumps(view)


def test_to_jsonable_decoded_insert() -> None:
    back = decode(encode(small_insert()))
    assert to_jsonable(back) == to_jsonable(small_insert())
    orjson.dumps(to_jsonable(back))


# --------------------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _decode_or_codec_error(data: bytes) -> TsMsg | None:
    try:
        msg = decode(data, REGISTRY)
    except CodecError:
        return None
    except Exception as exc:  # pragma: no cover - the failure being tested for
        pytest.fail(f"decode raised {type(exc).__name__}: {exc!r}")
    assert isinstance(msg, TsMsg)
    assert msg.size == len(data)
    # whatever decodes must also encode again, decode again and print
    again = decode(encode(msg, REGISTRY), REGISTRY)
    assert type(again) is type(msg)
    orjson.dumps(to_jsonable(msg))
    return msg


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    _decode_or_codec_error(data)
    _decode_or_codec_error(MAGIC + bytes([VERSION]) + data)


@FUZZ
@given(st.sampled_from(PAYLOADS), st.data())
def test_fuzz_one_mutation(payload: bytes, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
    i = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    buf = bytearray(payload)
    if kind == "flip":
        buf[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    elif kind == "set":
        buf[i] = data.draw(st.integers(min_value=0, max_value=255))
    elif kind == "cut":
        del buf[i:]
    elif kind == "insert":
        buf[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    else:
        del buf[i : i + data.draw(st.integers(min_value=1, max_value=8))]
    mutated = bytes(buf)
    if mutated == payload:
        assert decode(mutated, REGISTRY) == decode(payload, REGISTRY)
        return
    with pytest.raises(DecodeError):
        decode(mutated, REGISTRY)


@FUZZ
@given(st.sampled_from(PAYLOADS), st.lists(st.tuples(st.integers(0), st.integers(0, 255)),
                                           min_size=1, max_size=6))  # fmt: skip
def test_fuzz_many_mutations(payload: bytes, changes: list[tuple[int, int]]) -> None:
    buf = bytearray(payload)
    for i, value in changes:
        buf[i % len(buf)] = value
    _decode_or_codec_error(bytes(buf))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@FUZZ
@given(st.sampled_from(PAYLOADS), st.data())
def test_fuzz_body_with_valid_checksum(payload: bytes, data: st.DataObject) -> None:
    """Corrupt the JSON body (or the buffers) but fix the checksum: the body checks must hold."""
    _, body, area = split_payload(payload)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(_paths(body)))
        new = data.draw(
            json_values
            | st.integers(min_value=-(2**63), max_value=2**64 - 1)
            | st.fixed_dictionaries({"o": st.integers(-4, 200), "n": st.integers(-4, 200)})
        )
        body = _replace(body, path, new)
    if data.draw(st.booleans()):
        area = data.draw(st.binary(max_size=len(area) + 16))
    _decode_or_codec_error(rebuild(payload, body, area))


NASTY_VALUES: list[Any] = [
    None, True, 0, -1, 7, 2**63 - 1, 2**64 - 1, -(2**63), 1.5, "", "x", "float_vector",
    [], [7], [-1], ["a"], [2**64 - 1], {}, {"o": 0, "n": 10**9}, {"o": -1, "n": 1},
]  # fmt: skip


@pytest.mark.parametrize("index", range(len(PAYLOADS)), ids=SAMPLE_IDS)
def test_every_body_value_replaced_by_nasty_values(index: int) -> None:
    """Deterministic sweep: each node of each body, replaced by each nasty value."""
    payload = PAYLOADS[index]
    _, body, area = split_payload(payload)
    for path in _paths(body):
        for value in NASTY_VALUES:
            msg = _decode_or_codec_error(rebuild(payload, _replace(body, path, value), area))
            if msg is not None:
                assert type(msg) is type(SAMPLES[index])


@FUZZ
@given(st.sampled_from([*range(1, 8), 1002]), json_values, st.binary(max_size=64))
def test_fuzz_arbitrary_json_bodies(msg_type: int, body: Any, area: bytes) -> None:
    _decode_or_codec_error(build_payload(msg_type, orjson.dumps(body), area))


def test_every_codec_error_is_a_msgstream_error() -> None:
    assert issubclass(DecodeError, CodecError)
    assert issubclass(UnknownMessageTypeError, CodecError)
    assert issubclass(CodecError, MsgStreamError)


def test_rows_are_joined_where_that_is_cheaper() -> None:
    """Short plain rows are validated joined; long rows and rows rich in quotes, commas
    and brackets one by one (joined, they took 2-3 times as long)."""

    def texts(values: list[Any]) -> tuple[bytes, int]:
        return b"".join(map(orjson.dumps, values)), len(values)

    assert packed._joined_pays(*texts(list(range(50_000))))
    assert packed._joined_pays(*texts([{"pk": k, "even": k % 2 == 0} for k in range(50_000)]))
    assert not packed._joined_pays(*texts(["x" * 1000] * 20_000))
    assert not packed._joined_pays(*texts([{f"k{i}": f"v{i}" for i in range(12)}] * 50_000))
    assert not packed._joined_pays(*texts([7]))  # one row: nothing to join
