"""benchmarks/floor_encoder.py: the least checked encoders the benchmarks measure
``encode_batch`` and ``encode_one`` against give ``encode``'s bytes on the messages they
are measured on, and refuse every other message rather than encode it wrongly."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msgstream.bench.workload import MessageFactory, Workload
from msgstream.wire.codec import encode
from msgstream.wire.messages import DeleteMsg, InsertMsg, TsMsg
from msgstream.wire.schema import DataType, FieldData

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from floor_encoder import least_checked_encode, least_checked_encode_one


def workload_pack(count: int = 50) -> list[TsMsg]:
    return MessageFactory(Workload(size=320)).pack(3, count)


def test_the_floors_encode_the_benchmarks_messages_as_encode_does() -> None:
    pack = workload_pack()
    expected = [encode(msg) for msg in pack]
    for msg in pack:
        msg.size = 0
    assert least_checked_encode(pack) == expected
    assert [msg.size for msg in pack] == list(map(len, expected))
    for msg in pack:
        msg.size = 0
    assert [least_checked_encode_one(msg) for msg in pack] == expected
    assert [msg.size for msg in pack] == list(map(len, expected))


def _varchar(msg: InsertMsg) -> None:
    msg.fields = [FieldData("payload", DataType.VARCHAR, ["text"])]


def _two_rows(msg: InsertMsg) -> None:
    msg.row_ids = np.array([1, 2])


def _masked(msg: InsertMsg) -> None:
    msg.fields[0].valid = np.array([True])


def _int32_ids(msg: InsertMsg) -> None:
    msg.row_ids = msg.row_ids.astype(np.int32)


@pytest.mark.parametrize("change", [_varchar, _two_rows, _masked, _int32_ids])
def test_any_other_message_is_refused(change: Any) -> None:
    pack = workload_pack()
    change(pack[7])
    with pytest.raises(ValueError, match="not"):
        least_checked_encode(pack)
    with pytest.raises(ValueError, match="not"):
        least_checked_encode_one(pack[7])


def test_other_types_places_and_envelope_values_are_refused() -> None:
    pack = workload_pack()
    delete = DeleteMsg(msg_id=1, timestamp=1, collection_name="c", primary_keys=[1])
    with pytest.raises(ValueError, match="not"):
        least_checked_encode([*pack, delete])
    with pytest.raises(ValueError, match="not"):
        least_checked_encode_one(delete)
    pack[4].partition_name = "other"
    with pytest.raises(ValueError, match="partition"):
        least_checked_encode(pack)
    pack = workload_pack()
    pack[2].source_id = 1.5  # type: ignore[assignment]
    with pytest.raises(TypeError, match="int"):
        least_checked_encode(pack)
    pack = workload_pack()
    pack[2].source_id = 1 << 63
    with pytest.raises(OverflowError):
        least_checked_encode(pack)
