"""An idempotent Parquet sink keyed on ``batch_id``.

Batch ``N`` lives in ``<path>/batch_id=N/``. It is written to a staging directory under
``<path>/_staging/`` and renamed into place, replacing an earlier attempt of the same
batch, so a batch that is redone after a failure is stored once and a reader never sees
half a batch. Spark hides the ``_``-prefixed directories and discovers ``batch_id`` as a
partition column: ``spark.read.parquet(path)``. Paths go through Hadoop's FileSystem,
so anything Spark can write to works; the swap is atomic where the file system's
directory rename is (local disks, HDFS).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ..errors import BridgeError
from ..process.pyspark_private import java_context, jvm

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BATCH_COLUMN = "batch_id"


class ParquetSink:
    """Call it as the batcher's user function: ``sink(df, batch_id)``."""

    def __init__(self, path: str, *, compression: str = "snappy") -> None:
        self.path = path.rstrip("/") or "/"
        self.compression = compression

    def batch_path(self, batch_id: int) -> str:
        return f"{self.path}/{BATCH_COLUMN}={batch_id}"

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        spark = df.sparkSession
        fs, path_cls = _filesystem(spark, self.path)
        token = uuid.uuid4().hex[:12]
        final = path_cls(self.batch_path(batch_id))
        staging = path_cls(f"{self.path}/_staging/{BATCH_COLUMN}={batch_id}-{token}")
        df.write.mode("errorifexists").option("compression", self.compression).parquet(
            staging.toString()
        )
        trash = None
        if fs.exists(final):  # an earlier attempt of this batch: replace it
            trash = path_cls(f"{self.path}/_trash/{BATCH_COLUMN}={batch_id}-{token}")
            fs.mkdirs(trash.getParent())
            if not fs.rename(final, trash):
                raise BridgeError(f"cannot move the earlier attempt {final.toString()} aside")
        if not fs.rename(staging, final):
            raise BridgeError(f"cannot rename {staging.toString()} to {final.toString()}")
        if trash is not None:
            fs.delete(trash, True)


def _filesystem(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """Hadoop's FileSystem for ``path`` and its Path class (through py4j)."""
    path_cls = jvm(spark).org.apache.hadoop.fs.Path
    conf = java_context(spark).hadoopConfiguration()
    return path_cls(path).getFileSystem(conf), path_cls
