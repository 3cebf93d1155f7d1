"""The least any PySpark streaming data source costs: the ``floor`` figures of
``bench_spark.py``.

``format("msgstream-floor")`` serves rows already converted, from Arrow IPC files on
local disk: no broker or store, no decoding, no planning. Its micro-batches have the
msgstream source's shape -- one partition per channel -- so a query of it pays only what
Spark itself charges a Python streaming source: the source runner's calls, the offset
and commit logs, a Python worker per task and the Arrow batches' trip into the JVM.

:func:`write_pieces` cuts the benchmark's prebuilt table into pieces of at most
``max_rows`` rows (the msgstream source never puts more than ``maxRowsPerTrigger`` rows
in a micro-batch either), each split into one file per channel. Offsets count pieces:
one query reads them all in one micro-batch, or one piece per micro-batch with the
option ``maxRowsPerTrigger`` set (any value: the pieces were sized for it).

The workers cannot import this module (``benchmarks/`` is not on their path), so
:func:`register` has cloudpickle ship it by value.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

NAME = "msgstream-floor"


def write_pieces(table: pa.Table, directory: Path, channels: int, max_rows: int) -> int:
    """Write ``table`` under ``directory`` as pieces of at most ``max_rows`` rows, each
    as ``channels`` files; the number of pieces."""
    directory.mkdir(parents=True, exist_ok=True)
    pieces = 0
    for start in range(0, table.num_rows, max_rows):
        piece = table.slice(start, max_rows)
        share = -(-piece.num_rows // channels)
        for channel in range(channels):
            part = piece.slice(channel * share, share).combine_chunks()
            with ipc.new_file(str(_path(directory, pieces, channel)), part.schema) as out:
                out.write_table(part)
        pieces += 1
    (directory / "layout.json").write_text(json.dumps({"pieces": pieces, "channels": channels}))
    return pieces


def _path(directory: Path, piece: int, channel: int) -> Path:
    return directory / f"piece{piece}-channel{channel}.arrow"


class _Files(InputPartition):
    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__(list(paths))
        self.paths = list(paths)


class FloorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"piece": n}``: the pieces before ``n`` were read. It supports
    ``Trigger.AvailableNow`` itself, as the msgstream source does: Spark would otherwise
    read a source in one micro-batch under that trigger, its read limit ignored."""

    def __init__(self, directory: str, limited: bool) -> None:
        self.directory = Path(directory)
        layout = json.loads((self.directory / "layout.json").read_text())
        self.pieces: int = layout["pieces"]
        self.channels: int = layout["channels"]
        self.limited = limited

    def initialOffset(self) -> dict[str, int]:
        return {"piece": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass  # every piece exists already

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(1) if self.limited else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        step = 1 if isinstance(limit, ReadMaxRows) else self.pieces
        return {"piece": min(start["piece"] + step, self.pieces)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        pieces = range(start["piece"], end["piece"])
        return [
            _Files([str(_path(self.directory, piece, channel)) for piece in pieces])
            for channel in range(self.channels)
            if pieces
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Files)
        for path in partition.paths:
            with ipc.open_file(path) as reader:
                for index in range(reader.num_record_batches):
                    yield reader.get_batch(index)

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorSource(DataSource):
    """Options: ``directory`` (:func:`write_pieces`' own), ``schema`` (the frame's Spark
    schema as JSON) and, for one piece per micro-batch, ``maxRowsPerTrigger``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(self.options["schema"]))

    def streamReader(self, schema: Any) -> FloorReader:
        return FloorReader(self.options["directory"], "maxrowspertrigger" in self.options)


def register(spark: Any) -> None:
    """Make ``format("msgstream-floor")`` available in ``spark``."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    spark.dataSource.register(FloorSource)
