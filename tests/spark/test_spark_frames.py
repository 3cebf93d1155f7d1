"""Pack -> Arrow -> DataFrame round trip with a real Spark session: every field type,
null values, an empty pack, a pack with only deletes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from msgstream import DeleteMsg, MsgPack, SubscriptionPosition, TimeTickMsg, new_msgstream
from msgstream import new_ttmsgstream as new_tt
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema
from spark.data import memory_config
from spark.test_convert import ALL_TYPES, all_types_insert, expected_all_types

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


async def consumed_packs(tmp_path: Path) -> list[MsgPack]:
    """Three packs read back through a TtMsgStream: inserts of every type with nulls, an
    empty one (time moved, no data) and one with only deletes."""
    config = memory_config(str(tmp_path))
    channels = ["rt-a", "rt-b"]
    async with new_msgstream(config) as producer, new_tt(config, pursuit_lag_s=0) as consumer:
        await producer.as_producer(channels)
        await consumer.as_consumer(channels, "rt", SubscriptionPosition.EARLIEST)

        async def tick(ts: int) -> None:
            await producer.broadcast(MsgPack.of(TimeTickMsg(msg_id=ts, timestamp=ts)))

        insert = all_types_insert(msg_id=7, ts=100)
        insert.hash_keys = [0, 0, 0]  # all three rows to channel rt-a
        await producer.produce(MsgPack.of(insert))
        await tick(110)
        await tick(120)  # nothing in (110, 120]: an empty pack
        delete = DeleteMsg(
            msg_id=9, timestamp=130, collection_name="all", primary_keys=[2, 3], hash_keys=[1, 1]
        )
        await producer.produce(MsgPack.of(delete))
        await tick(140)
        return [await anext(aiter(consumer)) for _ in range(3)]


def to_frame(spark: SparkSession, kind: FrameKind, packs: list[MsgPack]) -> list[dict[str, Any]]:
    frame = FrameSchema(ALL_TYPES, kind)
    builder = FrameBuilder(frame)
    for pack in packs:
        builder.add_pack(pack)
    df = spark.createDataFrame(builder.build(), schema=frame.spark_schema())
    assert df.schema == frame.spark_schema()
    rows = [row.asDict() for row in df.collect()]
    for row in rows:  # Spark returns binary as bytearray
        if row.get("bin") is not None:
            row["bin"] = bytes(row["bin"])
    return rows


async def test_every_field_type_round_trips_through_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    inserts, empty, deletes = await consumed_packs(tmp_path)
    assert (len(inserts.msgs), len(empty.msgs), len(deletes.msgs)) == (1, 0, 1)
    expected = expected_all_types(channel="rt-a")
    assert to_frame(spark, FrameKind.INSERTS, [inserts]) == expected
    assert to_frame(spark, FrameKind.INSERTS, [empty]) == []
    assert to_frame(spark, FrameKind.CHANGES, [empty]) == []
    assert to_frame(spark, FrameKind.INSERTS, [deletes]) == []
    assert to_frame(spark, FrameKind.DELETES, [deletes]) == [
        {"pk": key, "_ts": 130, "_channel": "rt-b", "_msg_id": 9, "_partition": "_default"}
        for key in (2, 3)
    ]
    changes = to_frame(spark, FrameKind.CHANGES, [inserts, empty, deletes])
    assert [(r["_op"], r["pk"]) for r in changes] == [
        ("insert", 1), ("insert", 2), ("insert", 3), ("delete", 2), ("delete", 3)
    ]  # fmt: skip
    assert [{k: v for k, v in r.items() if k != "_op"} for r in changes[:3]] == expected
    assert all(
        r[name] is None
        for r in changes[3:]
        for name in ("b", "i8", "s", "j", "bin", "vec", "_row_id")
    )
