"""The Arrow reader follows the body layout (``msgstream.wire.bodies``) too: a field added to a
copy of the Insert layout, and a data type added to a copy of the data types, are read
and checked by ``InsertColumns`` with no edit of its own (no Spark). The codec's side is
``tests/test_body_layout.py``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from msgstream import (
    CollectionSchema,
    DataType,
    DecodeError,
    FieldData,
    FieldSchema,
    InsertMsg,
    encode,
)
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema
from msgstream.bridge_spark.data.columnar import BatchRefused, InsertColumns
from msgstream.bridge_spark.data.frames import arrow_type
from msgstream.wire.codec import decode
from test_body_layout import REGISTRY, WIDER, WiderTypes, weighted
from test_codec import rebuild, split_payload

FRAME = FrameSchema(
    CollectionSchema(
        "c",
        (
            FieldSchema("pk", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=2),
            FieldSchema("name", DataType.VARCHAR),
        ),
    ),
    FrameKind.CHANGES,
)


def test_a_field_added_to_a_copy_of_the_layout_is_read_as_decode_reads_it() -> None:
    payloads = [encode(weighted(i, rows=i + 1), REGISTRY) for i in range(1, 5)]
    columns = InsertColumns(FRAME, layout=WIDER)
    assert all(columns.offer(p, "ch") for p in payloads)
    builder = FrameBuilder(FRAME)
    for payload in payloads:
        builder.add(decode(payload, REGISTRY), "ch")
    assert columns.build().equals(builder.build())


@pytest.mark.parametrize("size", [16, 32])
def test_an_added_field_of_the_wrong_size_is_refused_as_decode_refuses_it(size: int) -> None:
    good = encode(weighted(1), REGISTRY)
    _, body, _ = split_payload(good)
    bad = rebuild(good, {**body, "row_weights": {"o": 48, "n": size}})
    with pytest.raises(DecodeError, match=f"buffer holds {size} bytes"):
        decode(bad, REGISTRY)
    columns = InsertColumns(FRAME, layout=WIDER)
    assert columns.offer(good, "ch") and columns.offer(bad, "ch")
    with pytest.raises(BatchRefused, match="a body's numbers are not its buffers'"):
        columns.build()
    # The real layout does not read the added buffer: it takes the same payloads.
    plain = InsertColumns(FRAME)
    assert plain.offer(good, "ch") and plain.offer(bad, "ch")
    assert plain.build().num_rows == 6


def wider_insert(msg_id: int, values: list[Any], valid: list[bool]) -> InsertMsg:
    rows = len(values)
    return InsertMsg(
        msg_id=msg_id,
        timestamp=100 + msg_id,
        collection_name="w",
        row_ids=list(range(msg_id * 10, msg_id * 10 + rows)),
        fields=[
            FieldData("pk", WiderTypes.INT64, list(range(rows))),  # type: ignore[arg-type]
            FieldData("n", WiderTypes.UINT16, values, valid=valid),  # type: ignore[arg-type]
            FieldData("s", WiderTypes.VARCHAR, [f"s{v}" for v in values]),  # type: ignore[arg-type]
        ],
    )


def test_a_data_type_added_to_a_copy_of_the_types_becomes_its_arrow_column() -> None:
    assert arrow_type(WiderTypes.UINT16) == pa.uint16()  # type: ignore[arg-type]
    schema = CollectionSchema(
        "w",
        (
            FieldSchema("pk", WiderTypes.INT64),  # type: ignore[arg-type]
            FieldSchema("n", WiderTypes.UINT16, nullable=True),  # type: ignore[arg-type]
            FieldSchema("s", WiderTypes.VARCHAR),  # type: ignore[arg-type]
        ),
    )
    frame = FrameSchema(schema, FrameKind.INSERTS)
    columns = InsertColumns(frame)
    assert columns.offer(encode(wider_insert(1, [0, 7, 65535], [True, False, True])), "ch")
    assert columns.offer(encode(wider_insert(2, [9], [True])), "ch")
    table = columns.build()
    assert table.schema.field("n").type == pa.uint16()
    assert table.column("n").to_pylist() == [0, None, 65535, 9]
    assert table.column("s").to_pylist() == ["s0", "s7", "s65535", "s9"]
    assert table.column("_row_id").to_pylist() == [10, 11, 12, 20]
    assert np.array_equal(table.column("pk").to_numpy(), [0, 1, 2, 0])
