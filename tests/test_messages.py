"""The message model and schemas: built-in types, user types, validation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest

from msgstream.errors import DecodeError, MissingTimestampError, UnknownMessageTypeError
from msgstream.wire.codec import (
    MessageRegistry,
    decode,
    default_registry,
    encode,
    register_message_type,
)
from msgstream.wire.messages import (
    BUILTIN_TYPES,
    USER_TYPE_MIN,
    CreateCollectionMsg,
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    MsgType,
    TimeTickMsg,
    TsMsg,
)
from msgstream.wire.packed import PackedValues
from msgstream.wire.position import MsgPosition
from msgstream.wire.schema import (
    CollectionSchema,
    DataType,
    FieldData,
    FieldSchema,
    column_from_values,
    values_equal,
)
from test_codec import build_payload

ROWS = 4


def every_type_columns() -> list[FieldData]:
    """One column of every DataType (some nullable), ROWS rows each."""
    rng = np.random.default_rng(7)
    return [
        FieldData("b", DataType.BOOL, [True, False, True, True]),
        FieldData("i8", DataType.INT8, [-128, 0, 1, 127], valid=[True, False, True, True]),
        FieldData("i16", DataType.INT16, [-32768, 0, 2, 32767]),
        FieldData("i32", DataType.INT32, [-(2**31), 0, 3, 2**31 - 1]),
        FieldData("pk", DataType.INT64, [-(2**63), 10, 11, 2**63 - 1]),
        FieldData("f", DataType.FLOAT, [0.5, -1.25, 3.0e38, float("inf")]),
        FieldData("d", DataType.DOUBLE, [0.1, -2.5, 1e300, -0.0], valid=[1, 1, 0, 1]),
        FieldData("s", DataType.VARCHAR, ["", "héllo", "x" * 300, None], valid=[1, 1, 1, 0]),
        FieldData("j", DataType.JSON, [{"a": [1, 2]}, None, 3, "str"]),
        FieldData("bin", DataType.BINARY, [b"\x00\xff", b"", None, bytearray(b"abc")]),
        FieldData(
            "vec",
            DataType.FLOAT_VECTOR,
            rng.standard_normal((ROWS, 8)).astype(np.float32),
            dim=8,
        ),
    ]


def make_insert(**overrides: Any) -> InsertMsg:
    kwargs: dict[str, Any] = {
        "msg_id": 11,
        "timestamp": 5000,
        "source_id": 3,
        "collection_name": "books",
        "partition_name": "p1",
        "row_ids": [100, 101, 102, 103],
        "row_timestamps": [4000, 4999, 4500, 4100],
        "fields": every_type_columns(),
    }
    kwargs.update(overrides)
    return InsertMsg(**kwargs)


def book_schema() -> CollectionSchema:
    return CollectionSchema(
        name="books",
        description="all the books",
        fields=(
            FieldSchema("pk", DataType.INT64, is_primary=True),
            FieldSchema("title", DataType.VARCHAR, nullable=True, description="t"),
            FieldSchema("meta", DataType.JSON),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=128),
        ),
    )


def round_trip(msg: TsMsg, registry: MessageRegistry = default_registry) -> TsMsg:
    payload = encode(msg, registry)
    back = decode(payload, registry)
    assert back == msg
    assert msg == back
    assert type(back) is type(msg)
    assert back.msg_id == msg.msg_id
    assert back.timestamp == msg.timestamp
    assert back.source_id == msg.source_id
    assert back.msg_type == msg.msg_type
    assert back.hash_keys == []  # routing only, never serialised
    assert back.position is None
    assert back.size == msg.size == len(payload)
    return back


# --------------------------------------------------------------------------- built-in types


def test_builtin_type_codes() -> None:
    assert [cls.MSG_TYPE for cls in BUILTIN_TYPES] == [1, 2, 3, 4, 5, 6, 7]
    assert TimeTickMsg().msg_type == MsgType.TIME_TICK == 1
    assert make_insert().msg_type == MsgType.INSERT == 2
    assert DeleteMsg(timestamp=1, collection_name="c").msg_type == 3
    assert CreateCollectionMsg(collection_name="c", schema=book_schema()).msg_type == 4
    assert DropCollectionMsg(collection_name="c").msg_type == 5
    assert CreatePartitionMsg(collection_name="c", partition_name="p").msg_type == 6
    assert DropPartitionMsg(collection_name="c", partition_name="p").msg_type == 7
    assert USER_TYPE_MIN == 1000


def test_time_tick_round_trip() -> None:
    tick = TimeTickMsg(msg_id=1, timestamp=2**64 - 1, source_id=-5, hash_keys=[3])
    back = round_trip(tick)
    assert back.timestamp == 2**64 - 1
    assert back.source_id == -5
    assert (back.begin_ts, back.end_ts) == (2**64 - 1, 2**64 - 1)
    assert back.body_fields() == {}
    assert not back.is_dml


def test_insert_every_data_type_round_trips() -> None:
    msg = make_insert(hash_keys=[1, 2, 3, 4])
    assert {c.dtype for c in msg.fields} == set(DataType)
    back = round_trip(msg)
    assert isinstance(back, InsertMsg)
    assert back.collection_name == "books"
    assert back.partition_name == "p1"
    assert back.num_rows == ROWS
    assert back.is_dml
    assert back.row_ids.dtype == np.int64
    assert back.row_ids.tolist() == [100, 101, 102, 103]
    assert back.timestamps.dtype == np.uint64
    assert back.timestamps.tolist() == [4000, 4999, 4500, 4100]
    assert (back.begin_ts, back.end_ts) == (4000, 4999)
    assert [c.name for c in back.fields] == [c.name for c in msg.fields]
    for original, decoded in zip(msg.fields, back.fields, strict=True):
        assert decoded == original
        assert decoded.dtype is original.dtype
        numpy_dtype = original.dtype.numpy_dtype
        if numpy_dtype is None:
            assert isinstance(decoded.values, PackedValues)  # packed, equal to the list
            assert decoded.values == original.values
        else:
            assert isinstance(decoded.values, np.ndarray)
            assert decoded.values.dtype == np.dtype(numpy_dtype)
            assert decoded.values.shape == np.asarray(original.values).shape
        if original.valid is None:
            assert decoded.valid is None
        else:
            assert decoded.valid is not None
            assert decoded.valid.dtype == np.bool_
            assert decoded.valid.tolist() == original.valid.tolist()
    assert back.field("vec").dim == 8
    assert back.field("vec").values.shape == (ROWS, 8)
    assert back.field("bin").values == [b"\x00\xff", b"", None, b"abc"]
    assert back.field("j").values == [{"a": [1, 2]}, None, 3, "str"]
    assert back.field("i8").valid.tolist() == [True, False, True, True]  # type: ignore[union-attr]
    assert back.field("s").values == ["", "héllo", "x" * 300, None]
    f = back.field("f").values
    assert f.tolist() == [0.5, -1.25, np.float32(3.0e38), float("inf")]  # type: ignore[union-attr]
    assert back.field("pk").values.tolist() == [-(2**63), 10, 11, 2**63 - 1]  # type: ignore[union-attr]


def test_insert_equality_is_by_value() -> None:
    a, b = make_insert(), make_insert()
    assert a == b
    assert a != make_insert(msg_id=12)
    assert a != make_insert(source_id=4)
    assert a != make_insert(collection_name="other")
    assert a != make_insert(row_timestamps=[4000, 4999, 4500, 4101])
    columns = every_type_columns()
    columns[-1].values[0, 0] += 1.0  # type: ignore[index]
    assert a != make_insert(fields=columns)
    columns = every_type_columns()
    columns[1] = FieldData("i8", DataType.INT8, [-128, 0, 1, 127], valid=[True, True, True, True])
    assert a != make_insert(fields=columns)
    assert a != make_insert(fields=every_type_columns()[:-1])
    assert a != TimeTickMsg(msg_id=11, timestamp=5000, source_id=3)
    assert (a == 5) is False


def test_insert_row_timestamps_default_to_msg_timestamp() -> None:
    msg = InsertMsg(
        msg_id=1,
        timestamp=777,
        collection_name="c",
        row_ids=[1, 2, 3],
        fields=[FieldData("x", DataType.INT32, [1, 2, 3])],
    )
    assert msg.partition_name == "_default"
    assert msg.timestamps.dtype == np.uint64
    assert msg.timestamps.tolist() == [777, 777, 777]
    assert (msg.begin_ts, msg.end_ts) == (777, 777)
    back = round_trip(msg)
    assert back.timestamps.tolist() == [777, 777, 777]  # type: ignore[attr-defined]


def test_empty_insert_and_delete_use_msg_timestamp() -> None:
    empty = InsertMsg(msg_id=2, timestamp=55, collection_name="c")
    assert empty.num_rows == 0
    assert (empty.begin_ts, empty.end_ts) == (55, 55)
    assert round_trip(empty).begin_ts == 55
    dele = DeleteMsg(msg_id=3, timestamp=66, collection_name="c")
    assert dele.num_rows == 0
    assert (dele.begin_ts, dele.end_ts) == (66, 66)
    assert round_trip(dele).end_ts == 66


def test_delete_int_keys_round_trip() -> None:
    msg = DeleteMsg(
        msg_id=21,
        timestamp=900,
        source_id=2,
        collection_name="books",
        partition_name="p",
        primary_keys=np.array([5, -(2**63), 2**63 - 1], dtype=np.int64),
        row_timestamps=[800, 900, 850],
    )
    assert (msg.begin_ts, msg.end_ts) == (800, 900)
    assert msg.is_dml
    back = round_trip(msg)
    assert isinstance(back, DeleteMsg)
    assert isinstance(back.primary_keys, np.ndarray)
    assert back.primary_keys.dtype == np.int64
    assert back.primary_keys.tolist() == [5, -(2**63), 2**63 - 1]
    assert back.timestamps.tolist() == [800, 900, 850]
    assert (back.begin_ts, back.end_ts) == (800, 900)
    assert (back.collection_name, back.partition_name) == ("books", "p")


def test_delete_int_list_keys_become_int64() -> None:
    msg = DeleteMsg(timestamp=4, collection_name="c", primary_keys=[1, 2])
    assert isinstance(msg.primary_keys, np.ndarray)
    assert msg.primary_keys.dtype == np.int64
    assert msg.timestamps.tolist() == [4, 4]


def test_delete_str_keys_round_trip() -> None:
    msg = DeleteMsg(
        msg_id=22,
        timestamp=1000,
        collection_name="books",
        primary_keys=["a", "", "ünïcode", "a"],
    )
    assert msg.timestamps.tolist() == [1000] * 4
    back = round_trip(msg)
    assert isinstance(back, DeleteMsg)
    assert back.primary_keys == ["a", "", "ünïcode", "a"]
    assert type(back.primary_keys) is list
    assert back.partition_name == "_default"
    assert msg != DeleteMsg(
        msg_id=22, timestamp=1000, collection_name="books", primary_keys=["a", "", "x", "a"]
    )


def test_create_collection_round_trip() -> None:
    msg = CreateCollectionMsg(
        msg_id=31, timestamp=10, source_id=1, collection_name="books", collection_id=77,
        schema=book_schema(),
    )  # fmt: skip
    back = round_trip(msg)
    assert isinstance(back, CreateCollectionMsg)
    assert back.schema == book_schema()
    assert back.schema.field("vec").dim == 128
    assert back.schema.field("title").nullable is True
    assert back.schema.primary_field == FieldSchema("pk", DataType.INT64, is_primary=True)
    assert back.collection_id == 77
    other = CreateCollectionMsg(
        msg_id=31, timestamp=10, source_id=1, collection_name="books", collection_id=77,
        schema=CollectionSchema("books", book_schema().fields[:2]),
    )  # fmt: skip
    assert msg != other


@pytest.mark.parametrize(
    "msg",
    [
        DropCollectionMsg(
            msg_id=41, timestamp=2, source_id=9, collection_name="c", collection_id=4
        ),
        CreatePartitionMsg(msg_id=42, timestamp=3, collection_name="c", partition_name="p"),
        DropPartitionMsg(msg_id=43, timestamp=4, collection_name="c", partition_name="p"),
    ],
    ids=lambda m: type(m).__name__,
)
def test_ddl_round_trip(msg: TsMsg) -> None:
    back = round_trip(msg)
    assert back.body_fields() == msg.body_fields()
    assert (back.begin_ts, back.end_ts) == (msg.timestamp, msg.timestamp)
    assert not back.is_dml


def test_ddl_types_differ() -> None:
    create = CreatePartitionMsg(msg_id=1, collection_name="c", partition_name="p")
    drop = DropPartitionMsg(msg_id=1, collection_name="c", partition_name="p")
    assert create != drop
    assert decode(encode(create)) != drop


# --------------------------------------------------------------------------- row counts


def test_insert_row_timestamps_count_mismatch() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape("InsertMsg(msg_id=7, collection='c'): 2 row timestamps for 3 rows"),
    ):
        InsertMsg(msg_id=7, collection_name="c", row_ids=[1, 2, 3], row_timestamps=[1, 2])


def test_insert_field_count_mismatch() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape("InsertMsg(msg_id=8, collection='c'): field 'x' has 2 rows, not 3"),
    ):
        InsertMsg(
            timestamp=1,
            msg_id=8,
            collection_name="c",
            row_ids=[1, 2, 3],
            fields=[FieldData("x", DataType.INT64, [1, 2])],
        )


@pytest.mark.parametrize("kind", ["insert", "delete"])
@pytest.mark.parametrize("timestamp", [None, 0])
def test_dml_without_a_timestamp_is_refused_where_it_is_made(
    kind: str, timestamp: int | None
) -> None:
    """A 0 would sort before every time tick: the stream would drop it as late."""
    given = {} if timestamp is None else {"timestamp": timestamp}
    name = "InsertMsg" if kind == "insert" else "DeleteMsg"

    def build() -> object:
        if kind == "insert":
            return InsertMsg(msg_id=4, collection_name="c", row_ids=[1, 2], **given)
        return DeleteMsg(msg_id=4, collection_name="c", primary_keys=[1, 2], **given)

    with pytest.raises(MissingTimestampError) as info:
        build()
    assert str(info.value) == (
        f"{name}(msg_id=4, collection='c'): no timestamp; give timestamp= (a hybrid "
        "timestamp from TimeTickEmitter.begin()/reserve() or TsoAllocator.allocate()) or "
        "row_timestamps="
    )
    assert isinstance(info.value, ValueError)
    with pytest.raises(MissingTimestampError):  # row timestamps of 0 are no timestamp either
        InsertMsg(msg_id=4, collection_name="c", row_ids=[1, 2], row_timestamps=[0, 0])


def test_dml_with_row_timestamps_only_takes_the_latest_as_its_timestamp() -> None:
    msg = InsertMsg(collection_name="c", row_ids=[1, 2, 3], row_timestamps=[30, 50, 40])
    assert (msg.timestamp, msg.begin_ts, msg.end_ts) == (50, 30, 50)
    delete = DeleteMsg(collection_name="c", primary_keys=["a"], row_timestamps=[9])
    assert delete.timestamp == delete.end_ts == 9


def test_insert_timestamps_without_row_ids_is_rejected() -> None:
    # Rows are counted by row_ids; timestamps for rows that have no id cannot be encoded.
    with pytest.raises(ValueError, match=re.escape("collection='c'): 3 row timestamps for 0 rows")):
        InsertMsg(msg_id=9, collection_name="c", row_timestamps=[1, 2, 3])


def test_delete_count_mismatch_and_mixed_keys() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape("DeleteMsg(msg_id=5, collection='d'): 1 row timestamps for 2 rows"),
    ):
        DeleteMsg(msg_id=5, collection_name="d", primary_keys=["a", "b"], row_timestamps=[1])
    with pytest.raises(TypeError, match=re.escape("DeleteMsg(msg_id=6, collection='d')")) as info:
        DeleteMsg(timestamp=1, msg_id=6, collection_name="d", primary_keys=["a", 1])
    assert "mix str and non-str" in str(info.value)


# --------------------------------------------------------------------------- take


def test_insert_take_keeps_order_and_slices_everything() -> None:
    msg = make_insert(hash_keys=[10, 20, 30, 40])
    rows = np.array([3, 0, 2], dtype=np.intp)
    part = msg.take(rows)
    assert (part.msg_id, part.timestamp, part.source_id) == (11, 5000, 3)
    assert (part.collection_name, part.partition_name) == ("books", "p1")
    assert part.num_rows == 3
    assert part.hash_keys == [40, 10, 30]
    assert part.row_ids.tolist() == [103, 100, 102]
    assert part.timestamps.tolist() == [4100, 4000, 4500]
    assert (part.begin_ts, part.end_ts) == (4000, 4500)
    assert [c.name for c in part.fields] == [c.name for c in msg.fields]
    for whole, sliced in zip(msg.fields, part.fields, strict=True):
        assert len(sliced) == 3
        assert sliced.dtype is whole.dtype
        assert sliced.dim == whole.dim
        expected = [whole.values[i] for i in (3, 0, 2)]
        if isinstance(whole.values, np.ndarray):
            assert isinstance(sliced.values, np.ndarray)
            assert values_equal(sliced.values, np.asarray(expected))
        else:
            assert sliced.values == [bytes(v) if isinstance(v, bytearray) else v for v in expected]
        if whole.valid is not None:
            assert sliced.valid is not None
            assert sliced.valid.tolist() == [whole.valid[i] for i in (3, 0, 2)]
        else:
            assert sliced.valid is None
    assert part.field("vec").values.shape == (3, 8)
    assert part.field("i8").valid.tolist() == [True, True, True]  # type: ignore[union-attr]
    assert part.field("d").valid.tolist() == [True, True, False]  # type: ignore[union-attr]
    # the original is untouched
    assert msg.row_ids.tolist() == [100, 101, 102, 103]
    assert round_trip(part) == part


def test_insert_take_without_hash_keys_and_empty() -> None:
    msg = make_insert()
    assert msg.take(np.array([1], dtype=np.intp)).hash_keys == []
    empty = msg.take(np.array([], dtype=np.intp))
    assert empty.num_rows == 0
    assert all(len(c) == 0 for c in empty.fields)
    assert empty.field("vec").values.shape == (0, 8)
    assert (empty.begin_ts, empty.end_ts) == (5000, 5000)


def test_delete_take() -> None:
    ints = DeleteMsg(
        msg_id=1, timestamp=9, collection_name="c", primary_keys=[7, 8, 9],
        row_timestamps=[1, 2, 3], hash_keys=[70, 80, 90],
    )  # fmt: skip
    part = ints.take(np.array([2, 0], dtype=np.intp))
    assert part.primary_keys.tolist() == [9, 7]  # type: ignore[union-attr]
    assert part.timestamps.tolist() == [3, 1]
    assert part.hash_keys == [90, 70]
    strs = DeleteMsg(timestamp=1, collection_name="c", primary_keys=["x", "y", "z"])
    assert strs.take(np.array([1, 2], dtype=np.intp)).primary_keys == ["y", "z"]


def test_insert_field_lookup() -> None:
    msg = make_insert()
    assert msg.field("pk").dtype is DataType.INT64
    with pytest.raises(KeyError, match=re.escape("InsertMsg(msg_id=11) has no field 'nope'")):
        msg.field("nope")


# --------------------------------------------------------------------------- schema


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"name": "", "dtype": DataType.INT64}, "field name must not be empty"),
        ({"name": "v", "dtype": DataType.FLOAT_VECTOR}, "field 'v': a float_vector needs dim > 0"),
        ({"name": "v", "dtype": DataType.FLOAT_VECTOR, "dim": 0}, "needs dim > 0"),
        ({"name": "v", "dtype": DataType.FLOAT_VECTOR, "dim": -3}, "needs dim > 0"),
        (
            {"name": "n", "dtype": DataType.INT64, "dim": 4},
            "field 'n': dim is only valid for vector",
        ),
        (
            {"name": "k", "dtype": DataType.FLOAT, "is_primary": True},
            "field 'k': a primary key must be int64 or varchar",
        ),
        ({"name": "k", "dtype": DataType.JSON, "is_primary": True}, "must be int64 or varchar"),
    ],
)
def test_field_schema_validation(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        FieldSchema(**kwargs)


def test_field_schema_valid_and_round_trip() -> None:
    for f in book_schema().fields:
        assert FieldSchema.from_dict(f.to_dict()) == f
    assert FieldSchema("pk", DataType.VARCHAR, is_primary=True).is_primary
    assert FieldSchema("v", DataType.FLOAT_VECTOR, dim=4).to_dict() == {
        "name": "v",
        "dtype": "float_vector",
        "is_primary": False,
        "dim": 4,
        "nullable": False,
        "description": "",
    }
    assert FieldSchema.from_dict({"name": "x", "dtype": "int8"}) == FieldSchema("x", DataType.INT8)


def test_field_schema_unknown_dtype() -> None:
    with pytest.raises(
        ValueError, match=re.escape("field 'x': unknown data type 'int128'")
    ) as info:
        FieldSchema.from_dict({"name": "x", "dtype": "int128"})
    assert "float_vector" in str(info.value)  # lists the known types


def test_collection_schema_validation() -> None:
    with pytest.raises(ValueError, match=re.escape("collection 'c': duplicate field names ['a']")):
        CollectionSchema("c", (FieldSchema("a", DataType.INT64), FieldSchema("a", DataType.BOOL)))
    with pytest.raises(ValueError, match=re.escape("collection 'c': more than one primary key")):
        CollectionSchema(
            "c",
            (
                FieldSchema("a", DataType.INT64, is_primary=True),
                FieldSchema("b", DataType.VARCHAR, is_primary=True),
            ),
        )
    schema = book_schema()
    with pytest.raises(KeyError, match=re.escape("collection 'books' has no field 'nope'")):
        schema.field("nope")
    assert CollectionSchema("c", ()).primary_field is None
    assert CollectionSchema.from_dict(schema.to_dict()) == schema
    assert schema.to_dict()["fields"][3] == {
        "name": "vec",
        "dtype": "float_vector",
        "is_primary": False,
        "dim": 128,
        "nullable": False,
        "description": "",
    }


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "needle"),
    [
        (
            ("s", DataType.VARCHAR, ["a", 1]),
            {},
            TypeError,
            "field 's' row 1: expected str, got int",
        ),
        (("b", DataType.BINARY, [b"a", "x"]), {}, TypeError, "'b' row 1: expected bytes, got str"),
        (("n", DataType.INT64, ["abc"]), {}, TypeError, "'n': values do not convert to int64"),
        (("n", DataType.INT32, [[1, 2]]), {}, ValueError, "field 'n': expected a 1-d column"),
        (
            ("v", DataType.FLOAT_VECTOR, [[1.0, 2.0]]),
            {"dim": 3},
            ValueError,
            "field 'v': expected vectors of shape (rows, 3), got (1, 2)",
        ),
        (("v", DataType.FLOAT_VECTOR, [1.0, 2.0]), {"dim": 2}, ValueError, "got (2,)"),
        (("v", DataType.FLOAT_VECTOR, [[1.0]]), {}, ValueError, "'v': a float_vector needs dim"),
        (
            ("n", DataType.INT64, [1, 2]),
            {"valid": [True]},
            ValueError,
            "field 'n': valid mask has 1 entries for 2 rows",
        ),
    ],
)
def test_field_data_validation(
    args: tuple[Any, ...], kwargs: dict[str, Any], exc: type[Exception], needle: str
) -> None:
    with pytest.raises(exc, match=re.escape(needle)):
        FieldData(*args, **kwargs)


def test_field_data_normalises() -> None:
    col = FieldData("n", DataType.INT16, (1, 2, 3))
    assert isinstance(col.values, np.ndarray)
    assert col.values.dtype == np.int16
    empty_vec = FieldData("v", DataType.FLOAT_VECTOR, [], dim=5)
    assert empty_vec.values.shape == (0, 5)
    assert empty_vec.values.dtype == np.float32
    blob = FieldData("b", DataType.BINARY, [bytearray(b"x"), memoryview(b"yz"), None])
    assert blob.values == [b"x", b"yz", None]
    assert all(type(v) is bytes for v in blob.values if v is not None)


def test_column_from_values() -> None:
    vec = column_from_values("v", DataType.FLOAT_VECTOR, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert vec.dim == 3
    assert vec.values.shape == (2, 3)
    assert vec.values.dtype == np.float32
    names = column_from_values("s", DataType.VARCHAR, ("a", "b"))
    assert names.values == ["a", "b"]
    assert names.dim is None
    with pytest.raises(ValueError, match="cannot infer the vector dim of an empty column"):
        column_from_values("v", DataType.FLOAT_VECTOR, [])


# --------------------------------------------------------------------------- user types


@dataclass(kw_only=True, eq=False, repr=False)
class AuditMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = 1001

    user: str
    action: str = "read"
    tags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0


@pytest.fixture
def registry() -> MessageRegistry:
    reg = MessageRegistry(BUILTIN_TYPES)
    assert reg.register(AuditMsg) is AuditMsg
    return reg


def make_audit() -> AuditMsg:
    return AuditMsg(
        msg_id=51,
        timestamp=123,
        source_id=6,
        user="ann",
        action="write",
        tags=["x", "y"],
        details={"n": [1, 2, {"deep": None}], "ok": True},
        score=0.25,
    )


def test_user_type_round_trip(registry: MessageRegistry) -> None:
    msg = make_audit()
    assert msg.msg_type == 1001
    back = round_trip(msg, registry)
    assert isinstance(back, AuditMsg)
    assert back.body_fields() == {
        "user": "ann",
        "action": "write",
        "tags": ["x", "y"],
        "details": {"n": [1, 2, {"deep": None}], "ok": True},
        "score": 0.25,
    }
    assert registry.lookup(1001) is AuditMsg
    assert registry.knows(AuditMsg)
    assert not default_registry.knows(AuditMsg)
    assert back != AuditMsg(msg_id=51, timestamp=123, source_id=6, user="bob")
    # built-ins still work in the fresh registry
    round_trip(TimeTickMsg(timestamp=1), registry)


def test_user_type_unknown_to_default_registry(registry: MessageRegistry) -> None:
    msg = make_audit()
    with pytest.raises(UnknownMessageTypeError, match="AuditMsg") as info:
        encode(msg)
    assert "not registered" in str(info.value)
    assert info.value.type_code == "AuditMsg"
    payload = encode(msg, registry)
    with pytest.raises(UnknownMessageTypeError) as info2:
        decode(payload)
    assert info2.value.type_code == 1001
    assert "unknown message type 1001" in str(info2.value)
    assert "msg_id=51" in str(info2.value)


def test_unregistered_builtin_subclass_is_unknown() -> None:
    @dataclass(kw_only=True, eq=False, repr=False)
    class Tick2(TimeTickMsg):
        pass

    with pytest.raises(UnknownMessageTypeError, match="Tick2"):
        encode(Tick2(timestamp=1))


def test_unregister(registry: MessageRegistry) -> None:
    registry.unregister(AuditMsg)
    assert registry.lookup(1001) is None
    with pytest.raises(UnknownMessageTypeError):
        encode(make_audit(), registry)
    registry.unregister(AuditMsg)  # a second time is harmless


def test_register_in_default_registry_then_unregister() -> None:
    assert register_message_type(AuditMsg) is AuditMsg
    try:
        assert default_registry.lookup(1001) is AuditMsg
        round_trip(make_audit())
    finally:
        default_registry.unregister(AuditMsg)
    assert default_registry.lookup(1001) is None


def test_register_is_idempotent_for_the_same_class(registry: MessageRegistry) -> None:
    assert registry.register(AuditMsg) is AuditMsg
    assert registry.lookup(1001) is AuditMsg


def test_register_duplicate_code(registry: MessageRegistry) -> None:
    @dataclass(kw_only=True, eq=False, repr=False)
    class Other(TsMsg):
        MSG_TYPE: ClassVar[int] = 1001

    with pytest.raises(
        ValueError, match="message type code 1001 is already registered to AuditMsg"
    ):
        registry.register(Other)
    assert registry.lookup(1001) is AuditMsg


@pytest.mark.parametrize("code", [0, 1, 7, 999, 65536, -1])
def test_register_code_out_of_range(code: int) -> None:
    cls = type("Bad", (TsMsg,), {"MSG_TYPE": code})
    with pytest.raises(
        ValueError, match=re.escape(f"Bad.MSG_TYPE must be an int in [1000, 65535], got {code}")
    ):
        MessageRegistry().register(cls)


def test_register_requires_own_code() -> None:
    # A subclass that merely inherits a code would silently replace its parent.
    @dataclass(kw_only=True, eq=False, repr=False)
    class Child(AuditMsg):
        pass

    reg = MessageRegistry()
    with pytest.raises(
        ValueError, match=re.escape("Child.MSG_TYPE must be an int in [1000, 65535], got None")
    ):
        reg.register(Child)
    for builtin in BUILTIN_TYPES:
        with pytest.raises(ValueError, match=re.escape(f"got {builtin.MSG_TYPE!r}")):
            reg.register(builtin)


def test_user_type_bad_body_is_a_decode_error(registry: MessageRegistry) -> None:
    payload = encode(make_audit(), registry)
    good = decode(payload, registry)
    assert isinstance(good, AuditMsg)
    # the default decode_body refuses a body that does not match the dataclass
    bad = build_payload(1001, b'{"user": "ann", "nope": 1}', msg_id=51)
    with pytest.raises(DecodeError, match="AuditMsg: body does not match the type"):
        decode(bad, registry)
    missing = build_payload(1001, b'{"action": "x"}')
    with pytest.raises(DecodeError, match="AuditMsg"):
        decode(missing, registry)
    for key in ("msg_id", "hash_keys", "position", "size"):
        smuggled = build_payload(1001, b'{"user": "ann", "%s": [1]}' % key.encode())
        with pytest.raises(DecodeError, match="AuditMsg"):
            decode(smuggled, registry)


def test_position_is_not_part_of_equality_or_body() -> None:
    a = DropCollectionMsg(msg_id=1, collection_name="c")
    b = DropCollectionMsg(msg_id=1, collection_name="c", position=MsgPosition("ch", b"\x01"))
    assert a == b
    assert "position" not in b.body_fields()
    assert decode(encode(b)).position is None


def test_repr_shows_the_header_the_channel_and_the_rows_not_the_data() -> None:
    insert = InsertMsg(
        msg_id=7,
        timestamp=1234,
        source_id=2,
        collection_name="orders",
        row_ids=[1, 2, 3],
        fields=[FieldData("customer", DataType.VARCHAR, ["zelda-1", "zelda-2", "zelda-3"])],
    )
    delete = DeleteMsg(msg_id=8, timestamp=1235, collection_name="orders", primary_keys=["k"])
    tick = TimeTickMsg(msg_id=9, timestamp=1236)
    assert repr(insert) == "InsertMsg(msg_id=7, timestamp=1234, source_id=2, rows=3)"
    assert repr(delete) == "DeleteMsg(msg_id=8, timestamp=1235, source_id=0, rows=1)"
    assert repr(tick) == "TimeTickMsg(msg_id=9, timestamp=1236, source_id=0)"
    insert.position = MsgPosition("orders-1", b"id", "billing", 1234)
    assert str(insert) == (
        "InsertMsg(msg_id=7, timestamp=1234, source_id=2, channel='orders-1', rows=3)"
    )


async def test_a_consumed_message_repr_names_its_channel() -> None:
    """As a stream hands it out (built lazily from its payload): channel and row count."""
    from msgstream import MsgPack, MsgStream, SubscriptionPosition, config_from_dict, new_client

    client = new_client(
        config_from_dict({"mq": {"type": "memory"}, "memory": {"name": "repr"}}, env={})
    )
    async with MsgStream(client) as stream:
        await stream.as_producer(["repr-a"])
        rows = np.arange(40)
        await stream.produce(
            MsgPack.of(
                InsertMsg(
                    msg_id=1, timestamp=5, collection_name="c", row_ids=rows, hash_keys=[0] * 40
                ),
                DeleteMsg(
                    msg_id=2,
                    timestamp=6,
                    collection_name="c",
                    primary_keys=rows[:4],
                    hash_keys=[0] * 4,
                ),
            )
        )
        await stream.as_consumer(["repr-a"], "s", SubscriptionPosition.EARLIEST)
        shown = [repr(msg) for _ in range(2) for msg in (await anext(stream)).msgs]
    assert shown == [
        "InsertMsg(msg_id=1, timestamp=5, source_id=0, channel='repr-a', rows=40)",
        "DeleteMsg(msg_id=2, timestamp=6, source_id=0, channel='repr-a', rows=4)",
    ]
