"""The streaming source where users outgrow one machine: Spark's ``local-cluster``
master runs two executor JVMs, so readers are pickled and read away from the driver."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from msgstream import config_from_dict
from spark.data import channel_names, produce_sample

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

JOB = Path(__file__).with_name("cluster_query.py")


def test_the_source_on_a_local_cluster_writes_every_row_once(
    spark: SparkSession, tmp_path: Path, kafka_broker: Any
) -> None:
    bootstrap = kafka_broker.bootstrap
    config = config_from_dict({"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap}}, env={})
    channels = channel_names(f"cluster-{uuid.uuid4().hex[:6]}", 4)
    produced = asyncio.run(produce_sample(config, channels, 1200, msgs_per_tick=6))
    output = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(JOB),
            "--bootstrap",
            bootstrap,
            "--channels",
            ",".join(channels),
            "--out",
            str(output),
            "--checkpoint",
            str(tmp_path / "checkpoint"),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
        env={**os.environ, "SPARK_WORKER_DIR": str(tmp_path / "work")},
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "cluster-query: done, block managers=3" in done.stdout  # the driver, 2 executors
    rows = spark.read.parquet(str(output)).select("_op", "pk").collect()
    assert Counter(r["pk"] for r in rows if r["_op"] == "insert") == Counter(produced.inserted)
    assert Counter(r["pk"] for r in rows if r["_op"] == "delete") == Counter(produced.deleted)
