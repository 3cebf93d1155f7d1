"""Packs to Arrow tables: every field type, nulls, several messages, errors (no Spark)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from msgstream import (
    CollectionSchema,
    DataType,
    DeleteMsg,
    FieldData,
    FieldSchema,
    InsertMsg,
    MsgPosition,
    TimeTickMsg,
    encode,
)
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema, SchemaMismatchError
from msgstream.wire.codec import peek_time_range

ALL_TYPES = CollectionSchema(
    "all",
    (
        FieldSchema("pk", DataType.INT64, is_primary=True),
        FieldSchema("b", DataType.BOOL, nullable=True),
        FieldSchema("i8", DataType.INT8, nullable=True),
        FieldSchema("i16", DataType.INT16, nullable=True),
        FieldSchema("i32", DataType.INT32, nullable=True),
        FieldSchema("f", DataType.FLOAT, nullable=True),
        FieldSchema("d", DataType.DOUBLE, nullable=True),
        FieldSchema("s", DataType.VARCHAR, nullable=True),
        FieldSchema("j", DataType.JSON, nullable=True),
        FieldSchema("bin", DataType.BINARY, nullable=True),
        FieldSchema("vec", DataType.FLOAT_VECTOR, dim=3, nullable=True),
    ),
)
VALID = np.array([True, False, True])


def all_types_insert(msg_id: int = 7, ts: int = 100, pks: tuple[int, ...] = (1, 2, 3)) -> InsertMsg:
    """Three rows; the middle one is null in every nullable field (by mask or None)."""
    return InsertMsg(
        msg_id=msg_id,
        timestamp=ts,
        collection_name="all",
        partition_name="p1",
        row_ids=list(pks),
        row_timestamps=[ts, ts + 1, ts + 2],
        fields=[
            FieldData("pk", DataType.INT64, list(pks)),
            FieldData("b", DataType.BOOL, [True, False, False], valid=VALID),
            FieldData("i8", DataType.INT8, [-128, 0, 127], valid=VALID),
            FieldData("i16", DataType.INT16, [-32768, 0, 32767], valid=VALID),
            FieldData("i32", DataType.INT32, [-(2**31), 0, 2**31 - 1], valid=VALID),
            FieldData("f", DataType.FLOAT, [1.5, 0.0, -2.25], valid=VALID),
            FieldData("d", DataType.DOUBLE, [1e300, 0.0, -0.5], valid=VALID),
            FieldData("s", DataType.VARCHAR, ["héllo", None, ""]),
            FieldData("j", DataType.JSON, [{"a": [1, 2]}, None, "text"]),
            FieldData("bin", DataType.BINARY, [b"\x00\xff", None, b""]),
            FieldData(
                "vec",
                DataType.FLOAT_VECTOR,
                [[0.5, 1.0, 1.5], [0.0, 0.0, 0.0], [-1.0, 2.0, 3.0]],
                dim=3,
                valid=VALID,
            ),
        ],
    )


def expected_all_types(
    msg_id: int = 7, ts: int = 100, pks: tuple[int, ...] = (1, 2, 3), channel: str = "ch-a"
) -> list[dict[str, Any]]:
    meta = {"_msg_id": msg_id, "_channel": channel, "_partition": "p1"}
    first, middle, last = pks
    return [
        {
            "pk": first,
            "b": True,
            "i8": -128,
            "i16": -32768,
            "i32": -(2**31),
            "f": 1.5,
            "d": 1e300,
            "s": "héllo",
            "j": '{"a":[1,2]}',
            "bin": b"\x00\xff",
            "vec": [0.5, 1.0, 1.5],
            "_row_id": first,
            "_ts": ts,
            **meta,
        },
        {
            "pk": middle,
            "b": None,
            "i8": None,
            "i16": None,
            "i32": None,
            "f": None,
            "d": None,
            "s": None,
            "j": None,
            "bin": None,
            "vec": None,
            "_row_id": middle,
            "_ts": ts + 1,
            **meta,
        },
        {
            "pk": last,
            "b": False,
            "i8": 127,
            "i16": 32767,
            "i32": 2**31 - 1,
            "f": -2.25,
            "d": -0.5,
            "s": "",
            "j": '"text"',
            "bin": b"",
            "vec": [-1.0, 2.0, 3.0],
            "_row_id": last,
            "_ts": ts + 2,
            **meta,
        },
    ]


def build(
    kind: FrameKind, *added: tuple[Any, str], schema: CollectionSchema = ALL_TYPES
) -> pa.Table:
    builder = FrameBuilder(FrameSchema(schema, kind))
    for msg, channel in added:
        builder.add(msg, channel)
    table = builder.build()
    assert table.schema.equals(builder.frame.arrow_schema)
    return table


def test_every_field_type_with_nulls_converts_exactly() -> None:
    table = build(FrameKind.INSERTS, (all_types_insert(), "ch-a"))
    assert table.column_names == [
        "pk", "b", "i8", "i16", "i32", "f", "d", "s", "j", "bin", "vec",
        "_row_id", "_ts", "_channel", "_msg_id", "_partition",
    ]  # fmt: skip
    assert table.to_pylist() == expected_all_types()


def test_messages_of_several_channels_concatenate_in_order() -> None:
    table = build(
        FrameKind.INSERTS,
        (all_types_insert(7, 100, (1, 2, 3)), "ch-a"),
        (all_types_insert(8, 200, (4, 5, 6)), "ch-b"),
        (all_types_insert(9, 300, (7, 8, 9)), "ch-a"),
    )
    assert table.to_pylist() == (
        expected_all_types(7, 100, (1, 2, 3), "ch-a")
        + expected_all_types(8, 200, (4, 5, 6), "ch-b")
        + expected_all_types(9, 300, (7, 8, 9), "ch-a")
    )


def test_changes_frame_holds_inserts_then_deletes() -> None:
    delete = DeleteMsg(
        msg_id=20, timestamp=500, collection_name="all", partition_name="p2", primary_keys=[2, 3]
    )
    table = build(FrameKind.CHANGES, (all_types_insert(), "ch-a"), (delete, "ch-b"))
    rows = table.to_pylist()
    assert [r["_op"] for r in rows] == ["insert"] * 3 + ["delete"] * 2
    nulls = {name: None for name in ("b", "i8", "i16", "i32", "f", "d", "s", "j", "bin", "vec")}
    assert rows[3:] == [
        {"pk": key, **nulls, "_op": "delete", "_row_id": None, "_ts": 500, "_channel": "ch-b",
         "_msg_id": 20, "_partition": "p2"}
        for key in (2, 3)
    ]  # fmt: skip
    inserted = [{k: v for k, v in r.items() if k != "_op"} for r in rows[:3]]
    assert inserted == expected_all_types()


def test_a_pack_with_only_deletes() -> None:
    delete = DeleteMsg(msg_id=3, timestamp=10, collection_name="all", primary_keys=[5])
    assert build(FrameKind.INSERTS, (delete, "c")).num_rows == 0
    assert build(FrameKind.DELETES, (delete, "c")).to_pylist() == [
        {"pk": 5, "_ts": 10, "_channel": "c", "_msg_id": 3, "_partition": "_default"}
    ]
    changes = build(FrameKind.CHANGES, (delete, "c"))
    assert changes.column("_op").to_pylist() == ["delete"]


def test_varchar_primary_keys_in_deletes() -> None:
    schema = CollectionSchema("s", (FieldSchema("id", DataType.VARCHAR, is_primary=True),))
    delete = DeleteMsg(msg_id=1, timestamp=9, collection_name="s", primary_keys=["x", "y"])
    table = build(FrameKind.DELETES, (delete, "c"), schema=schema)
    assert table.column("id").to_pylist() == ["x", "y"]
    assert table.schema.field("id").type == pa.string()


def test_empty_input_gives_an_empty_table_of_the_frame() -> None:
    empty_insert = InsertMsg(msg_id=1, timestamp=5, collection_name="all")
    tick = TimeTickMsg(msg_id=2, timestamp=6)
    for kind in FrameKind:
        builder = FrameBuilder(FrameSchema(ALL_TYPES, kind))
        assert builder.add(empty_insert, "c") == 0
        assert builder.add(tick, "c") == 0
        table = builder.build()
        assert table.num_rows == 0
        assert table.schema.equals(builder.frame.arrow_schema)


def test_other_collections_are_ignored_and_missing_nullable_fields_are_null() -> None:
    other = all_types_insert()
    other.collection_name = "elsewhere"
    sparse = InsertMsg(
        msg_id=4, timestamp=1, collection_name="all", row_ids=[9],
        fields=[FieldData("pk", DataType.INT64, [9])],
    )  # fmt: skip
    builder = FrameBuilder(FrameSchema(ALL_TYPES, FrameKind.INSERTS))
    assert builder.add(other, "c") == 0
    assert builder.add(sparse, "c") == 1
    row = builder.build().to_pylist()[0]
    assert row["pk"] == 9
    assert all(row[name] is None for name in ("b", "s", "j", "bin", "vec"))


def test_builder_counts_and_clears() -> None:
    builder = FrameBuilder(FrameSchema(ALL_TYPES, FrameKind.CHANGES))
    builder.add(all_types_insert(), "c")
    builder.add(DeleteMsg(msg_id=2, timestamp=1, collection_name="all", primary_keys=[1]), "c")
    assert (builder.insert_rows, builder.delete_rows, builder.rows) == (3, 1, 4)
    builder.clear()
    assert builder.rows == 0
    assert builder.build().num_rows == 0


@pytest.mark.parametrize(
    ("column", "problem"),
    [
        (FieldData("i8", DataType.INT16, [1, 2, 3]),
         "has type int16, but the collection schema says int8"),
        (FieldData("vec", DataType.FLOAT_VECTOR, np.zeros((3, 2)), dim=2),
         "has vectors of dim 2, but the collection schema says 3"),
        (FieldData("nope", DataType.INT64, [1, 2, 3]), "is not a field of collection 'all'"),
    ],
)  # fmt: skip
def test_a_field_that_does_not_fit_names_field_message_and_channel(
    column: FieldData, problem: str
) -> None:
    msg = all_types_insert()
    msg.fields = [c for c in msg.fields if c.name != column.name] + [column]
    msg.position = MsgPosition("ch-x", b"\x01\x02")
    builder = FrameBuilder(FrameSchema(ALL_TYPES, FrameKind.CHANGES))
    with pytest.raises(SchemaMismatchError) as caught:
        builder.add(msg, "ch-x")
    text = str(caught.value)
    assert text.startswith(f"field {column.name!r} in InsertMsg(msg_id=7, collection='all') at ")
    assert "MessageID 0102 on channel 'ch-x'" in text
    assert problem in text
    assert caught.value.field == column.name
    assert caught.value.channel == "ch-x"
    assert builder.rows == 0


def test_required_fields_must_be_present_and_not_null() -> None:
    schema = CollectionSchema(
        "r",
        (FieldSchema("pk", DataType.INT64, is_primary=True), FieldSchema("name", DataType.VARCHAR)),
    )
    builder = FrameBuilder(FrameSchema(schema, FrameKind.INSERTS))
    missing = InsertMsg(
        msg_id=1, timestamp=1, collection_name="r", row_ids=[1],
        fields=[FieldData("pk", DataType.INT64, [1])],
    )  # fmt: skip
    with pytest.raises(SchemaMismatchError) as caught:
        builder.add(missing, "c")
    assert str(caught.value) == (
        "field 'name' in InsertMsg(msg_id=1, collection='r') on channel 'c': "
        "is missing, and the field is not nullable"
    )
    null = InsertMsg(
        msg_id=2, timestamp=1, collection_name="r", row_ids=[1],
        fields=[FieldData("pk", DataType.INT64, [1]), FieldData("name", DataType.VARCHAR, [None])],
    )  # fmt: skip
    with pytest.raises(SchemaMismatchError) as caught:
        builder.add(null, "c")
    assert str(caught.value) == (
        "field 'name' in InsertMsg(msg_id=2, collection='r') on channel 'c': "
        "holds nulls, but the field is not nullable"
    )


def test_delete_keys_must_match_the_primary_key_type() -> None:
    builder = FrameBuilder(FrameSchema(ALL_TYPES, FrameKind.DELETES))
    delete = DeleteMsg(msg_id=5, timestamp=1, collection_name="all", primary_keys=["a"])
    with pytest.raises(SchemaMismatchError) as caught:
        builder.add(delete, "c")
    assert str(caught.value) == (
        "field 'pk' in DeleteMsg(msg_id=5, collection='all') on channel 'c': "
        "delete keys are varchar, but the primary key is int64"
    )


def test_frames_refuse_reserved_names_and_deletes_without_primary_key() -> None:
    clash = CollectionSchema("c", (FieldSchema("_ts", DataType.INT64),))
    with pytest.raises(
        SchemaMismatchError, match="field '_ts': collection 'c' uses a name reserved"
    ):
        FrameSchema(clash, FrameKind.INSERTS)
    keyless = CollectionSchema("k", (FieldSchema("x", DataType.INT64),))
    assert FrameSchema(keyless, FrameKind.INSERTS).columns[0].name == "x"
    with pytest.raises(SchemaMismatchError, match="collection 'k' has no primary key field"):
        FrameSchema(keyless, FrameKind.CHANGES)


@pytest.mark.parametrize("kind", list(FrameKind))
def test_arrow_schema_is_the_one_pyspark_derives_from_the_spark_schema(kind: FrameKind) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    frame = FrameSchema(ALL_TYPES, kind)
    assert to_arrow_schema(frame.spark_schema(), timezone="UTC").equals(frame.arrow_schema)


def test_peek_time_range_reads_the_envelope() -> None:
    insert = all_types_insert(ts=100)
    assert peek_time_range(encode(insert)) == (2, 100, 102)
    assert peek_time_range(encode(TimeTickMsg(msg_id=1, timestamp=55))) == (1, 55, 55)
