"""Spark DataFrames over Arrow tables that stay Arrow record batches.

``spark.createDataFrame(table)`` turns a table smaller than
``spark.sql.execution.arrow.localRelationThreshold`` (48 MiB by default) into a
``LocalRelation``: before the call returns, the driver's JVM converts every row to an
``UnsafeRow``, on one thread. A larger table stays Arrow record batches in an RDD, which
the executors convert, in parallel, when an action runs. The micro-batcher's batches are
of the first kind (50,000 sample rows are ~12 MiB), and the row conversion made
``createDataFrame`` cost 1.4 µs a row against 0.5 µs as record batches; with a ``noop``
write in the user function the whole batcher ran 1.2-1.5x faster as record batches
(``benchmarks/bench_spark.py`` figures in the README).

Spark has no per-call choice, so :func:`arrow_dataframe` sets the session's threshold to
0 for the duration of the call and puts the previous value back. One lock serialises the
callers in this process, so two batchers sharing a session cannot leave it changed. The
rows are the same either way; only the physical plan differs.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

LOCAL_RELATION_THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"
_switching = threading.Lock()


def arrow_dataframe(
    spark: SparkSession, table: pa.Table, schema: StructType, *, local_relation: bool = False
) -> DataFrame:
    """``spark.createDataFrame(table, schema=schema)``; unless ``local_relation``, kept as
    Arrow record batches whatever the table's size (see the module's docstring)."""
    if local_relation:
        return spark.createDataFrame(table, schema=schema)
    with _switching:
        before = spark.conf.get(LOCAL_RELATION_THRESHOLD)
        spark.conf.set(LOCAL_RELATION_THRESHOLD, "0")
        try:
            return spark.createDataFrame(table, schema=schema)
        finally:
            if before is None:
                spark.conf.unset(LOCAL_RELATION_THRESHOLD)
            else:
                spark.conf.set(LOCAL_RELATION_THRESHOLD, before)
