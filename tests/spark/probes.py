"""A one-row Python streaming source that reports where its parts ran: what its
driver-side runner says when Spark asks for the latest offset, and what an executor's
worker says when it reads the row."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession


def probe_query(
    spark: SparkSession,
    checkpoint: Path,
    name: str,
    on_runner: Callable[[], str],
    on_worker: Callable[[], str],
) -> Row:
    """Run one ``AvailableNow`` query of a source named ``name`` into a memory table of
    that name; its one row holds ``runner`` (``on_runner()``, called in the source's
    runner) and ``worker`` (``on_worker()``, called where the row is read)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Reader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, Any]:
            return {"n": 0}

        def latestOffset(self) -> dict[str, Any]:
            return {"n": 1, "runner": on_runner()}

        def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
            return [InputPartition(end["runner"])] if start["n"] < end["n"] else []

        def read(self, partition: InputPartition) -> Iterator[tuple[str, str]]:
            yield partition.value, on_worker()

    class Probe(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> str:
            return "runner string, worker string"

        def streamReader(self, schema: Any) -> Reader:
            return Reader()

    spark.dataSource.register(Probe)
    query = (
        spark.readStream.format(name)
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    [row] = spark.table(name).collect()
    return row
