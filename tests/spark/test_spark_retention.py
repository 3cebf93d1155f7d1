"""Retention sees the streaming source: the query's subscription follows Spark's commits.

The source's driver opens the rocksmq store read-only, so its subscription is a hold file
that the writing process's retention honours (``msgstream.backends.rocksmq.holds``).
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from msgstream import config_from_dict
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore
from msgstream.backends.rocksmq.retention import RetentionPolicy
from msgstream.bridge_spark import drop_subscription
from msgstream.bridge_spark.data.workload import sample_schema
from spark.data import channel_names, produce_sample
from spark.test_spark_source import committed_offsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PAGE = 8192
QUERY = "orders-job"


def retention_sweep(path: Path) -> RocksStore:
    """The writing process's retention, as strict as it gets: every page every
    subscription and hold acknowledged goes (the caller closes the store)."""
    store = RocksStore(
        str(path),
        RocksOptions(page_size=PAGE, retention=RetentionPolicy(max_age_ms=-1, max_size=0)),
    )
    store.run_retention()
    return store


def held(path: Path, channels: list[str]) -> dict[str, int]:
    reader = RocksStore(str(path), RocksOptions(read_only=True))
    try:
        return {c: hold.next_id for c in channels for hold in reader.holds.of_channel(c)}
    finally:
        reader.close()


async def test_retention_never_deletes_what_the_query_has_not_committed(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "store"
    settings = {"path": str(path), "page_size_bytes": PAGE}
    config = config_from_dict({"mq": {"type": "rocksmq"}, "rocksmq": settings}, env={})
    channels = channel_names("kept", 2)
    first = await produce_sample(config, channels, 400, msgs_per_tick=4)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def ingest() -> None:
        query = (
            spark.readStream.format("msgstream")
            .option("rocksmq.path", str(path))
            .option("channels", ",".join(channels))
            .option("subscription", QUERY)
            .option("collectionSchema", json.dumps(sample_schema().to_dict()))
            .option("maxRowsPerTrigger", "150")
            .load()
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None

    ingest()
    # The hold stands where the last batch Spark let the source go of ends: Spark calls
    # commit(end) of a batch when it plans the next one, so the last batch is still held.
    offsets = committed_offsets(checkpoint)
    assert len(offsets) >= 3
    last: dict[str, Any] = offsets[max(offsets) - 1]["positions"]
    expected = {c: RocksmqMessageID.parse(base64.b64decode(last[c])).value for c in channels}
    assert held(path, channels) == expected

    second = await produce_sample(config, channels, 300, seed=3, create=False)
    store = retention_sweep(path)
    try:
        for channel in channels:
            # pages wholly before the hold went; nothing from the hold on did
            assert 1 < store.first_readable(channel) <= expected[channel]
            assert store.first_id(channel) == store.first_readable(channel)
    finally:
        store.close()

    ingest()  # the rest, exactly once, although retention ran in between
    rows = spark.read.parquet(str(output)).select("_op", "pk").collect()
    inserted = Counter(r["pk"] for r in rows if r["_op"] == "insert")
    assert inserted == Counter(first.inserted) + Counter(second.inserted)

    moved = held(path, channels)
    await drop_subscription(config, channels, QUERY)
    assert held(path, channels) == {}
    store = retention_sweep(path)  # released: retention takes every closed page now
    try:
        for channel in channels:
            assert store.first_readable(channel) > moved[channel]
    finally:
        store.close()
