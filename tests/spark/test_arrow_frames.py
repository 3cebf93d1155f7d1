"""ArrowFrames: the DataFrame ``createDataFrame`` would make (schema, rows, partitions),
kept as Arrow record batches, in a handful of JVM calls; ``createDataFrame`` where the
direct path is not there."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema
from msgstream.bridge_spark.data import arrow_frames as module
from msgstream.bridge_spark.data.arrow_frames import (
    LARGE_VAR_TYPES,
    LOCAL_RELATION_THRESHOLD,
    MAX_RECORDS_PER_BATCH,
    ArrowFrames,
)
from spark.test_convert import ALL_TYPES
from spark.test_spark_frames import consumed_packs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


async def every_type_table(tmp_path: Path) -> tuple[pa.Table, Any]:
    """Inserts of every field type with nulls, then deletes (null columns), as one
    changes frame: the table and its Spark schema."""
    frame = FrameSchema(ALL_TYPES, FrameKind.CHANGES)
    builder = FrameBuilder(frame)
    for pack in await consumed_packs(tmp_path):
        builder.add_pack(pack)
    return builder.build(), frame.spark_schema()


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in df.collect()]


def plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().logical().getClass().getSimpleName())


@contextmanager
def session_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.unset(key)


@contextmanager
def jvm_calls() -> Iterator[list[int]]:
    """Counts the Py4J round trips made meanwhile, but those releasing JVM objects that
    Python dropped (when they are made depends on the garbage collector)."""
    from py4j.clientserver import ClientServerConnection
    from py4j.protocol import MEMORY_COMMAND_NAME

    gc.collect()
    count = [0]
    original = ClientServerConnection.send_command

    def counted(self: ClientServerConnection, command: str) -> Any:
        if not command.startswith(MEMORY_COMMAND_NAME):
            count[0] += 1
        return original(self, command)

    ClientServerConnection.send_command = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        ClientServerConnection.send_command = original  # type: ignore[method-assign]


async def test_the_direct_path_makes_createDataFrames_frame_as_record_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    table, schema = await every_type_table(tmp_path)
    frames = ArrowFrames(spark)
    assert frames.direct
    with session_setting(spark, LOCAL_RELATION_THRESHOLD, "7654321"):  # the user's own
        ours = frames.dataframe(table, schema)
        assert spark.conf.get(LOCAL_RELATION_THRESHOLD) == "7654321"
        spark_own = spark.createDataFrame(table, schema=schema)
        assert (plan(ours), plan(spark_own)) == ("LogicalRDD", "LocalRelation")
        assert ours.schema == spark_own.schema == schema
        assert rows(ours) == rows(spark_own)
        assert len(rows(ours)) == 5
        empty = frames.dataframe(table.slice(0, 0), schema)
        assert (empty.schema, empty.count()) == (schema, 0)


async def test_the_direct_path_follows_the_sessions_arrow_settings(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Record batches per partition and large string types, read when it is made."""
    table, schema = await every_type_table(tmp_path)
    with session_setting(spark, MAX_RECORDS_PER_BATCH, "2"):
        frames = ArrowFrames(spark)
    assert frames.dataframe(table, schema).rdd.getNumPartitions() == 3  # 5 rows, 2 a batch
    with session_setting(spark, LARGE_VAR_TYPES, "true"):
        large = ArrowFrames(spark)
        assert large.direct
        assert rows(large.dataframe(table, schema)) == rows(spark.createDataFrame(table, schema))


async def test_the_direct_path_calls_the_jvm_a_handful_of_times(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Each call gives up the GIL and waits to take it back (see the module docstring):
    createDataFrame makes several times as many."""
    table, schema = await every_type_table(tmp_path)
    frames = ArrowFrames(spark)
    frames.dataframe(table, schema)  # warm: classes resolved, settings read
    with jvm_calls() as ours:
        frames.dataframe(table, schema)
    with jvm_calls() as spark_own:
        spark.createDataFrame(table, schema=schema)
    assert ours[0] <= 5, (ours, spark_own)
    assert spark_own[0] >= 6 * ours[0], (ours, spark_own)


async def test_without_the_direct_path_createDataFrame_does_the_same_job(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the probe fails (another PySpark, say), ArrowFrames falls back; no JVM in
    the process (Spark Connect) or I/O encryption on falls back without probing."""
    table, schema = await every_type_table(tmp_path)

    def refused(*args: object) -> DataFrame:
        raise RuntimeError("no such method")

    with monkeypatch.context() as patched:
        patched.setattr(module._DirectPath, "dataframe", refused)
        frames = ArrowFrames(spark)
    assert not frames.direct
    with session_setting(spark, LOCAL_RELATION_THRESHOLD, "7654321"):
        fallback = frames.dataframe(table, schema)
        assert spark.conf.get(LOCAL_RELATION_THRESHOLD) == "7654321"
    assert plan(fallback) == "LogicalRDD"
    assert rows(fallback) == rows(ArrowFrames(spark).dataframe(table, schema))
    assert plan(frames.dataframe(table, schema, local_relation=True)) == "LocalRelation"

    monkeypatch.setattr(spark.sparkContext, "_encryption_enabled", True)
    assert not ArrowFrames(spark).direct
