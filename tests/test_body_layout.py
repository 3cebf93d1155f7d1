"""The body layout is declared once (``msgstream.wire.bodies``) and every reader follows it.

A field is added to a copy of the Insert layout, and a data type to a copy of the data
types, with no other edit: the generated encoder writes them, the generated decoder and
a decode plan read them back, and bad sizes are refused. (The Arrow reader's side is
``tests/spark/test_body_layout_arrow.py``.) The functions made from the real layout are
the ones the messages use, and spell its keys in its order.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import orjson
import pytest

from msgstream.errors import CodecError, DecodeError
from msgstream.wire import bodies
from msgstream.wire.bodies import INSERT, Buffer, DeclaredTypes, TypeSpec
from msgstream.wire.buffers import BodyReader, BodyWriter
from msgstream.wire.codec import ENVELOPE_SIZE, MessageRegistry, decode, decode_batch, encode
from msgstream.wire.lazy import DeferredBody, deferred
from msgstream.wire.messages import (
    BUILTIN_TYPES,
    DeleteMsg,
    InsertMsg,
    _assemble,  # what InsertMsg builds a decoded message with
    _check_scalars,
)
from msgstream.wire.packed import PackedKind
from msgstream.wire.schema import DataType, FieldData, decode_column
from test_codec import rebuild

WEIGHTS = Buffer("row_weights", "<f8")
WIDER = dataclasses.replace(INSERT, buffers=(*INSERT.buffers, WEIGHTS))
"""The Insert layout with one more per-row buffer, after the row timestamps."""


@deferred(row_weights=DeferredBody())
@dataclass(kw_only=True, eq=False, repr=False)
class WeightedInsert(InsertMsg):
    """An Insert whose body is laid out as :data:`WIDER`: its class adds the field (which a
    decode plan may make on first read) and says its layout, nothing else."""

    BODY: ClassVar[bodies.BodyLayout] = WIDER
    row_weights: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))

    encode_body = bodies.body_encoder(WIDER)
    decode_body = classmethod(  # type: ignore[assignment]
        bodies.body_decoder(WIDER, check=_check_scalars, build=_assemble, column=decode_column)
    )


REGISTRY = MessageRegistry((*(t for t in BUILTIN_TYPES if t is not InsertMsg), WeightedInsert))
"""Insert's type code, read as a :class:`WeightedInsert`."""


def weighted(msg_id: int = 1, rows: int = 3, *, text: bool = True) -> WeightedInsert:
    ids = np.arange(rows, dtype=np.int64) + 10 * msg_id
    names = [FieldData("name", DataType.VARCHAR, [f"n{i}" for i in ids.tolist()])]
    return WeightedInsert(
        msg_id=msg_id,
        timestamp=100 + msg_id,
        collection_name="c",
        row_ids=ids,
        row_timestamps=np.arange(rows, dtype=np.uint64) + 100 + msg_id,
        row_weights=ids / 4,
        fields=[
            FieldData("pk", DataType.INT64, ids),
            FieldData("vec", DataType.FLOAT_VECTOR, np.ones((rows, 2), np.float32) * msg_id, 2),
            *(names if text else []),
        ],
    )


def split(payload: bytes) -> tuple[Any, int]:
    json_len = int.from_bytes(payload[ENVELOPE_SIZE - 8 : ENVELOPE_SIZE - 4], "little")
    body_end = ENVELOPE_SIZE + json_len
    return orjson.loads(payload[ENVELOPE_SIZE:body_end]), body_end


def test_a_field_added_to_a_copy_of_the_layout_is_written_after_the_ones_before_it() -> None:
    msg = weighted()
    payload = encode(msg, REGISTRY)
    body, base = split(payload)
    assert list(body) == [
        "collection_name",
        "partition_name",
        "rows",
        "row_ids",
        "row_timestamps",
        "row_weights",
        "fields",
    ]
    assert body["row_weights"] == {"o": 48, "n": 24}  # after 3 row ids and 3 timestamps
    # Everything else as the real layout writes it, the buffers after it moved along.
    plain = InsertMsg(**{f.name: getattr(msg, f.name) for f in dataclasses.fields(InsertMsg)})
    plain_payload = encode(plain)
    plain_body, plain_base = split(plain_payload)
    assert {k: v for k, v in body.items() if k != "row_weights"} | {"fields": []} == plain_body | {
        "fields": []
    }
    area, plain_area = payload[base:], plain_payload[plain_base:]
    weights = np.array([2.5, 2.75, 3.0], "<f8").tobytes()
    assert area == plain_area[:48] + weights + plain_area[48:]


def test_a_field_added_to_a_copy_of_the_layout_is_read_back_by_decode_and_a_plan() -> None:
    for text in (True, False):
        msg = weighted(text=text)
        payload = encode(msg, REGISTRY)
        decoded = decode(payload, REGISTRY)
        assert type(decoded) is WeightedInsert
        assert decoded == msg
        assert decoded.row_weights.tolist() == [2.5, 2.75, 3.0]
        body, base = split(payload)
        placed = bodies.locate(WIDER, body, base)
        assert (placed is None) == text  # packed values are checked on every read: no plan
    assert placed is not None
    assert placed.at(WEIGHTS) == base + 48
    # decode_batch plans the body (the first payload decoded in full, the next planned)
    # and the message it builds makes the added field from the payload when read.
    batch = decode_batch([payload, payload], REGISTRY)
    assert type(batch.plans[1]).__name__ == "InsertPlan"
    assert batch.plans[1].deferred == {"row_ids", "row_timestamps", "row_weights", "fields"}
    lazy = batch.plans[1].build(1, msg.timestamp, 0, payload, b"id", ("ch", "sub"))
    assert "row_weights" not in vars(lazy)
    assert lazy.row_weights.tolist() == [2.5, 2.75, 3.0]  # type: ignore[attr-defined]
    assert lazy == msg
    # The real layout places the same body without the added buffer.
    placed = bodies.locate(INSERT, body, base)
    assert placed is not None
    assert [b.key for b, _ in placed.buffers] == ["row_ids", "row_timestamps"]


@pytest.mark.parametrize(
    ("reference", "needle"),
    [
        ({"o": 48, "n": 16}, "buffer holds 16 bytes, expected 3 x 8"),
        ({"o": 10**6, "n": 24}, "lies past the end"),
        ("AAAA", "buffer reference must be an object"),
    ],
)
def test_a_bad_added_field_is_refused_by_decode_and_gets_no_plan(
    reference: Any, needle: str
) -> None:
    payload = encode(weighted(text=False), REGISTRY)
    body, base = split(payload)
    assert bodies.locate(WIDER, body, base) is not None
    body["row_weights"] = reference
    changed = rebuild(payload, body)
    with pytest.raises(DecodeError, match=needle):
        decode(changed, REGISTRY)
    placed = bodies.locate(WIDER, body, split(changed)[1])
    # No plan; or one that needs more than the payload has, which decode_batch refuses.
    assert placed is None or placed.end > len(changed)


NAMED = dataclasses.replace(INSERT, names=(*INSERT.names, "origin"))
"""The Insert layout with one more string."""


@dataclass(kw_only=True, eq=False, repr=False)
class OriginInsert(InsertMsg):
    BODY: ClassVar[bodies.BodyLayout] = NAMED
    origin: str = ""

    encode_body = bodies.body_encoder(NAMED)
    decode_body = classmethod(  # type: ignore[assignment]
        bodies.body_decoder(NAMED, check=_check_scalars, build=_assemble, column=decode_column)
    )


def test_a_string_added_to_a_copy_of_the_layout_is_read_back_and_decoded_in_full() -> None:
    """Plans set a message's collection and partition themselves: a layout with another
    string is decoded in full, every time (and still read right)."""
    registry = MessageRegistry((*(t for t in BUILTIN_TYPES if t is not InsertMsg), OriginInsert))
    msg = OriginInsert(
        msg_id=1, timestamp=5, collection_name="c", origin="sensor-7", row_ids=[1, 2]
    )
    payload = encode(msg, registry)
    body, base = split(payload)
    assert list(body)[:4] == ["collection_name", "partition_name", "origin", "rows"]
    assert decode(payload, registry) == msg
    assert bodies.locate(NAMED, body, base) is not None  # its buffers are placed ...
    batch = decode_batch([payload, payload], registry)
    assert [type(p).__name__ for p in batch.plans] == ["ReadyPlan", "ReadyPlan"]  # ... no plan
    assert all(p.build(1, 5, 0, payload, b"", ("c", "s")) == msg for p in batch.plans)


class WiderTypes(DeclaredTypes):
    """A copy of the data types with one more, ``uint16``: the one edit a new type takes."""

    INT64 = TypeSpec("int64", "int64", numpy_dtype="<i8")
    UINT16 = TypeSpec("uint16", "uint16", numpy_dtype="<u2")
    VARCHAR = TypeSpec("varchar", "string", packed=PackedKind.TEXT)


for _type in WiderTypes:
    _type.encode_column = bodies.column_encoder(_type)
DECODE_WIDER = bodies.column_decoder(WiderTypes, FieldData)


def test_a_data_type_added_to_a_copy_of_the_types_is_written_and_read_back() -> None:
    column = FieldData("n", WiderTypes.UINT16, [0, 1, 65535], valid=[True, False, True])  # type: ignore[arg-type]
    writer = BodyWriter()
    spec = column.encode(writer)
    assert spec == {
        "name": "n",
        "dtype": "uint16",
        "rows": 3,
        "buf": {"o": 0, "n": 6},
        "valid": {"o": 6, "n": 3},
    }
    area = b"".join(writer.chunks())
    assert area == np.array([0, 1, 65535], "<u2").tobytes() + b"\x01\x00\x01"
    read = DECODE_WIDER(spec, BodyReader(area, 0, "test"))
    assert read == column
    assert read.dtype is WiderTypes.UINT16
    with pytest.raises(DecodeError, match="expected 3 x 2"):
        DECODE_WIDER({**spec, "buf": {"o": 0, "n": 4}}, BodyReader(area, 0, "test"))
    with pytest.raises(ValueError, match="'uint16' is not a valid DataType"):
        decode_column(spec, BodyReader(area, 0, "test"))  # the real types lack it


def test_a_column_that_does_not_make_its_buffers_is_a_codec_error() -> None:
    column = FieldData("s", DataType.VARCHAR, ["\ud800"])
    with pytest.raises(CodecError, match="field 's': "):
        column.encode(BodyWriter())


def test_the_messages_use_the_functions_made_from_the_layout_which_spell_it_in_order() -> None:
    for cls in (InsertMsg, DeleteMsg):
        layout = cls.BODY
        keys = [layout.names[0], layout.names[1], layout.rows, *(b.key for b in layout.buffers)]
        if layout.keys is None:
            keys.append(layout.columns)
        else:
            keys += [layout.keys.numbers.key, layout.keys.texts]
        encoder = bodies.source(cls.encode_body)
        assert re.findall(r"'(\w+)'", encoder) == keys
        decoder = bodies.source(cls.__dict__["decode_body"].__func__)
        assert all(repr(key) in decoder for key in keys)
    for dtype in DataType:
        encoder = bodies.source(dtype.encode_column)
        written = ["name", "dtype", "rows", "dim"]
        written += [b.key for b in bodies.COLUMN.buffers(dtype.storage)]
        assert re.findall(r"(?:out\[|, |\{)'(\w+)'(?:\]|:)", encoder) == written
