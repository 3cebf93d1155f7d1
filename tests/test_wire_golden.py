"""Golden payloads: the exact bytes codec version 3 writes for Insert and Delete bodies.

The expected bytes below were written by the codec as it stood before the body layout
was declared in one module (:mod:`msgstream.wire.bodies`); every way of writing a payload
(``encode``, ``encode_batch``) must still write them, and every way of reading one
(``decode``, ``decode_batch`` cold and cached, unchecked bodies) must read them back as
the message they were made from. Small payloads are pinned byte for byte (hex), large
ones by their SHA-256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import msgstream.wire.batch_encoder as batch_encoder
from msgstream.wire.batch_encoder import encode_batch
from msgstream.wire.codec import MessageRegistry, decode, decode_batch, encode
from msgstream.wire.messages import BUILTIN_TYPES, DeleteMsg, InsertMsg, TsMsg
from msgstream.wire.schema import DataType, FieldData


def every_type_insert() -> InsertMsg:
    return InsertMsg(
        msg_id=11,
        timestamp=1003,
        source_id=5,
        collection_name="golden",
        partition_name="p1",
        row_ids=[101, 102, 103],
        row_timestamps=[1001, 1003, 1002],
        fields=[
            FieldData("b", DataType.BOOL, [True, False, True]),
            FieldData("i8", DataType.INT8, [-128, 0, 127], valid=[True, False, True]),
            FieldData("i16", DataType.INT16, [-32768, 1, 32767]),
            FieldData("i32", DataType.INT32, [-(2**31), 2, 2**31 - 1]),
            FieldData("pk", DataType.INT64, [-(2**63), 3, 2**63 - 1]),
            FieldData("f", DataType.FLOAT, [0.5, -1.25, 3.0e38]),
            FieldData("d", DataType.DOUBLE, [0.1, -2.5, 1e300], valid=[1, 0, 1]),
            FieldData("s", DataType.VARCHAR, ["", "héllo", None], valid=[1, 1, 0]),
            FieldData("j", DataType.JSON, [{"a": [1, 2]}, None, "x"]),
            FieldData("raw", DataType.BINARY, [b"\x00\xff", None, b""]),
            FieldData("v", DataType.FLOAT_VECTOR, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dim=2),
        ],
    )


def one_row_insert(msg_id: int = 21) -> InsertMsg:
    return InsertMsg(
        msg_id=msg_id,
        timestamp=2000 + msg_id,
        source_id=1,
        collection_name="golden",
        row_ids=[msg_id],
        fields=[
            FieldData("pk", DataType.INT64, np.array([msg_id])),
            FieldData("vec", DataType.FLOAT_VECTOR, np.full((1, 2), msg_id, np.float32), dim=2),
            FieldData("name", DataType.VARCHAR, [f"n{msg_id % 10}"]),
            FieldData("raw", DataType.BINARY, [b"\x5a" * 4]),
        ],
    )


def empty_insert() -> InsertMsg:
    return InsertMsg(msg_id=31, timestamp=3000, collection_name="golden")


def wide_insert() -> InsertMsg:
    rows = 70  # past the sizes below which small columns are written another way
    ids = np.arange(rows, dtype=np.int64)
    return InsertMsg(
        msg_id=41,
        timestamp=4000 + rows,
        collection_name="golden",
        row_ids=ids,
        row_timestamps=4000 + ids.astype(np.uint64) + 1,
        fields=[
            FieldData("pk", DataType.INT64, ids * 3),
            FieldData("vec", DataType.FLOAT_VECTOR, np.ones((rows, 4), np.float32) * 0.5, dim=4),
            FieldData("name", DataType.VARCHAR, [f"row-{i}" for i in range(rows)]),
            FieldData("meta", DataType.JSON, [None if i % 7 else {"i": i} for i in range(rows)]),
            FieldData("ok", DataType.BOOL, ids % 2 == 0, valid=ids % 5 != 0),
        ],
    )


def int_delete() -> DeleteMsg:
    return DeleteMsg(
        msg_id=51,
        timestamp=5003,
        source_id=2,
        collection_name="golden",
        partition_name="p2",
        primary_keys=[7, -8, 2**63 - 1],
        row_timestamps=[5001, 5003, 5002],
    )


def str_delete() -> DeleteMsg:
    return DeleteMsg(msg_id=52, timestamp=5100, collection_name="golden", primary_keys=["a", "bé"])


def one_row_delete() -> DeleteMsg:
    return DeleteMsg(msg_id=53, timestamp=5200, collection_name="golden", primary_keys=[9])


CASES: dict[str, Callable[[], TsMsg]] = {
    "every_type_insert": every_type_insert,
    "one_row_insert": one_row_insert,
    "empty_insert": empty_insert,
    "wide_insert": wide_insert,
    "int_delete": int_delete,
    "str_delete": str_delete,
    "one_row_delete": one_row_delete,
}

GOLDEN_HEX: dict[str, str] = {
    "every_type_insert": (
        "4d53030002000b00000000000000eb030000000000000500000000000000e903000000000000eb03"
        "000000000000ee030000176c48197b22636f6c6c656374696f6e5f6e616d65223a22676f6c64656e"
        "222c22706172746974696f6e5f6e616d65223a227031222c22726f7773223a332c22726f775f6964"
        "73223a7b226f223a302c226e223a32347d2c22726f775f74696d657374616d7073223a7b226f223a"
        "32342c226e223a32347d2c226669656c6473223a5b7b226e616d65223a2262222c22647479706522"
        "3a22626f6f6c222c22726f7773223a332c22627566223a7b226f223a34382c226e223a337d7d2c7b"
        "226e616d65223a226938222c226474797065223a22696e7438222c22726f7773223a332c22627566"
        "223a7b226f223a35312c226e223a337d2c2276616c6964223a7b226f223a35342c226e223a337d7d"
        "2c7b226e616d65223a22693136222c226474797065223a22696e743136222c22726f7773223a332c"
        "22627566223a7b226f223a35372c226e223a367d7d2c7b226e616d65223a22693332222c22647479"
        "7065223a22696e743332222c22726f7773223a332c22627566223a7b226f223a36332c226e223a31"
        "327d7d2c7b226e616d65223a22706b222c226474797065223a22696e743634222c22726f7773223a"
        "332c22627566223a7b226f223a37352c226e223a32347d7d2c7b226e616d65223a2266222c226474"
        "797065223a22666c6f6174222c22726f7773223a332c22627566223a7b226f223a39392c226e223a"
        "31327d7d2c7b226e616d65223a2264222c226474797065223a22646f75626c65222c22726f777322"
        "3a332c22627566223a7b226f223a3131312c226e223a32347d2c2276616c6964223a7b226f223a31"
        "33352c226e223a337d7d2c7b226e616d65223a2273222c226474797065223a227661726368617222"
        "2c22726f7773223a332c226f666673223a7b226f223a3133382c226e223a33327d2c226461746122"
        "3a7b226f223a3137302c226e223a367d2c226e756c6c73223a7b226f223a3137362c226e223a337d"
        "2c2276616c6964223a7b226f223a3137392c226e223a337d7d2c7b226e616d65223a226a222c2264"
        "74797065223a226a736f6e222c22726f7773223a332c226f666673223a7b226f223a3138322c226e"
        "223a33327d2c2264617461223a7b226f223a3231342c226e223a31387d7d2c7b226e616d65223a22"
        "726177222c226474797065223a2262696e617279222c22726f7773223a332c226f666673223a7b22"
        "6f223a3233322c226e223a33327d2c2264617461223a7b226f223a3236342c226e223a327d2c226e"
        "756c6c73223a7b226f223a3236362c226e223a337d7d2c7b226e616d65223a2276222c2264747970"
        "65223a22666c6f61745f766563746f72222c22726f7773223a332c2264696d223a322c2262756622"
        "3a7b226f223a3236392c226e223a32347d7d5d7d6500000000000000660000000000000067000000"
        "00000000e903000000000000eb03000000000000ea0300000000000001000180007f010001008001"
        "00ff7f0000008002000000ffffff7f00000000000000800300000000000000ffffffffffffff7f00"
        "00003f0000a0bfe6b1617f9a9999999999b93f00000000000004c09c7500883ce4377e0100010000"
        "00000000000000000000000000000600000000000000060000000000000068c3a96c6c6f00000101"
        "010000000000000000000b000000000000000f0000000000000012000000000000007b2261223a5b"
        "312c325d7d6e756c6c22782200000000000000000200000000000000020000000000000002000000"
        "0000000000ff0001000000803f0000004000004040000080400000a0400000c040"
    ),
    "one_row_insert": (
        "4d53030002001500000000000000e5070000000000000100000000000000e507000000000000e507"
        "000000000000b9010000af7e167b7b22636f6c6c656374696f6e5f6e616d65223a22676f6c64656e"
        "222c22706172746974696f6e5f6e616d65223a225f64656661756c74222c22726f7773223a312c22"
        "726f775f696473223a7b226f223a302c226e223a387d2c22726f775f74696d657374616d7073223a"
        "7b226f223a382c226e223a387d2c226669656c6473223a5b7b226e616d65223a22706b222c226474"
        "797065223a22696e743634222c22726f7773223a312c22627566223a7b226f223a31362c226e223a"
        "387d7d2c7b226e616d65223a22766563222c226474797065223a22666c6f61745f766563746f7222"
        "2c22726f7773223a312c2264696d223a322c22627566223a7b226f223a32342c226e223a387d7d2c"
        "7b226e616d65223a226e616d65222c226474797065223a2276617263686172222c22726f7773223a"
        "312c226f666673223a7b226f223a33322c226e223a31367d2c2264617461223a7b226f223a34382c"
        "226e223a327d7d2c7b226e616d65223a22726177222c226474797065223a2262696e617279222c22"
        "726f7773223a312c226f666673223a7b226f223a35302c226e223a31367d2c2264617461223a7b22"
        "6f223a36362c226e223a347d7d5d7d1500000000000000e507000000000000150000000000000000"
        "00a8410000a841000000000000000002000000000000006e31000000000000000004000000000000"
        "005a5a5a5a"
    ),
    "empty_insert": (
        "4d53030002001f00000000000000b80b0000000000000000000000000000b80b000000000000b80b"
        "00000000000084000000239c515a7b22636f6c6c656374696f6e5f6e616d65223a22676f6c64656e"
        "222c22706172746974696f6e5f6e616d65223a225f64656661756c74222c22726f7773223a302c22"
        "726f775f696473223a7b226f223a302c226e223a307d2c22726f775f74696d657374616d7073223a"
        "7b226f223a302c226e223a307d2c226669656c6473223a5b5d7d"
    ),
    "int_delete": (
        "4d530300030033000000000000008b13000000000000020000000000000089130000000000008b13"
        "0000000000007600000037c776f87b22636f6c6c656374696f6e5f6e616d65223a22676f6c64656e"
        "222c22706172746974696f6e5f6e616d65223a227032222c22726f7773223a332c22726f775f7469"
        "6d657374616d7073223a7b226f223a302c226e223a32347d2c22696e745f6b657973223a7b226f22"
        "3a32342c226e223a32347d7d89130000000000008b130000000000008a1300000000000007000000"
        "00000000f8ffffffffffffffffffffffffffff7f"
    ),
    "str_delete": (
        "4d53030003003400000000000000ec130000000000000000000000000000ec13000000000000ec13"
        "00000000000078000000d27f835d7b22636f6c6c656374696f6e5f6e616d65223a22676f6c64656e"
        "222c22706172746974696f6e5f6e616d65223a225f64656661756c74222c22726f7773223a322c22"
        "726f775f74696d657374616d7073223a7b226f223a302c226e223a31367d2c227374725f6b657973"
        "223a5b2261222c2262c3a9225d7dec13000000000000ec13000000000000"
    ),
    "one_row_delete": (
        "4d530300030035000000000000005014000000000000000000000000000050140000000000005014"
        "000000000000790000001f44f4f57b22636f6c6c656374696f6e5f6e616d65223a22676f6c64656e"
        "222c22706172746974696f6e5f6e616d65223a225f64656661756c74222c22726f7773223a312c22"
        "726f775f74696d657374616d7073223a7b226f223a302c226e223a387d2c22696e745f6b65797322"
        "3a7b226f223a382c226e223a387d7d50140000000000000900000000000000"
    ),
}
"""The payload of each case (hex), as written before the body layout was declared once."""

GOLDEN_SHA256: dict[str, tuple[int, str]] = {
    "wide_insert": (
        5421,
        "930159b9d127a946826b6da4c3f365562c4c10d6d8114d69888be9d3904f565a",
    ),
}
"""(size, SHA-256) of the payloads too large to spell out."""

BATCH_SHA256 = "d1ea96f5de1f3e9c656774c05ed1ed1c1ee3a0102022a3d5d2d47dfda591ef7f"
"""The SHA-256 of ``encode_batch`` of 12 one-row Inserts (the batch encoder's fast path),
the payloads joined."""


def batch() -> list[TsMsg]:
    return [one_row_insert(60 + i) for i in range(12)]


def _pinned(payload: bytes, case: str) -> None:
    if case in GOLDEN_HEX:
        assert payload.hex() == GOLDEN_HEX[case]
    else:
        assert (len(payload), hashlib.sha256(payload).hexdigest()) == GOLDEN_SHA256[case]


@pytest.mark.parametrize("case", list(CASES))
def test_encode_writes_the_golden_bytes(case: str) -> None:
    _pinned(encode(CASES[case]()), case)


@pytest.mark.parametrize("case", list(CASES))
def test_the_golden_bytes_decode_to_their_message_and_encode_again(case: str) -> None:
    payload = encode(CASES[case]())
    decoded = decode(payload)
    assert decoded == CASES[case]()
    _pinned(encode(decoded), case)


@pytest.mark.parametrize("case", list(CASES))
def test_decode_batch_reads_the_golden_bytes_as_decode_does(case: str) -> None:
    payload = encode(CASES[case]())
    registry = MessageRegistry(BUILTIN_TYPES)
    for unchecked in (frozenset(), frozenset({2, 3})):
        for _ in range(2):  # cold, then with the plan cached
            found = decode_batch([payload, payload], registry, unchecked=unchecked)
            assert not found.bad
            for index, plan in enumerate(found.plans):
                header = (found.msg_ids[index], found.stamps[index], found.sources[index])
                built = plan.build(*header, payload, b"id", ("ch", "sub"))
                assert built == decode(payload)


def test_encode_batch_writes_the_golden_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    grouped: list[int] = []
    real = batch_encoder._encode_group

    def recording(group: list[Any], columns: Any) -> list[bytes] | None:
        encoded = real(group, columns)
        grouped.append(len(group) if encoded is not None else 0)
        return encoded

    monkeypatch.setattr(batch_encoder, "_encode_group", recording)
    payloads = encode_batch(batch())
    assert grouped == [12]  # all on the fast path
    assert payloads == [encode(m) for m in batch()]
    assert hashlib.sha256(b"".join(payloads)).hexdigest() == BATCH_SHA256
