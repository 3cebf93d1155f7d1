"""Spark DataFrames over Arrow tables that stay Arrow record batches, made with few calls
into the JVM.

**Record batches, not rows.** ``spark.createDataFrame(table)`` turns a table smaller than
``spark.sql.execution.arrow.localRelationThreshold`` (48 MiB by default) into a
``LocalRelation``: before the call returns, the driver's JVM converts every row to an
``UnsafeRow``, on one thread. A larger table stays Arrow record batches in an RDD, which
the executors convert, in parallel, when an action runs. The micro-batcher's batches are
of the first kind (50,000 sample rows are ~12 MiB), and the row conversion on one thread
made ``createDataFrame`` slower than handing over record batches, and the whole batcher
slower even with a ``noop`` write that converts the rows on the executors anyway
(docs/benchmarks/spark.md). Spark has no per-call choice, so
:class:`ArrowFrames` sets the session's threshold to 0 for the duration of the call and
puts the previous value back. One lock serialises the callers in this process, so two
batchers sharing a session cannot leave it changed. The rows are the same either way;
only the physical plan differs.

**Few Py4J calls.** ``createDataFrame`` makes 38 Py4J round trips for one table (it
reads eight settings, resolves JVM classes by name, converts lists). Each one gives up
the GIL and takes it back, which costs little alone, but beside another busy Python
thread (the batcher's readers, the user's code) every take waits up to the interpreter's
switch interval. :class:`ArrowFrames` makes the same DataFrame (same schema, rows and
plan) in five: it writes the table as an Arrow stream file itself (pyarrow writes without
the GIL) and hands it to the two JVM calls ``createDataFrame`` ends with,
``PythonSQLUtils.readArrowStreamFromFile`` and ``PythonSQLUtils.toDataFrame``, resolved
once; the two settings it needs (``spark.sql.execution.arrow.maxRecordsPerBatch`` and
``spark.sql.execution.arrow.useLargeVarTypes``) are read when it is made. Beside a
thread running Python, a DataFrame made this way slows down far less than one from
``createDataFrame`` (docs/benchmarks/spark.md). Those calls are PySpark internals, so
:class:`ArrowFrames` first makes an empty DataFrame through them; where that fails, or
where there is no JVM in the process (Spark Connect) or I/O encryption is on (the data
must then go through a socket), it uses ``createDataFrame``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import TYPE_CHECKING

from msgstream.observability.logs import get_logger

from ..process.pyspark_private import encryption_enabled, java_session, jvm, runs_on_jvm, temp_dir

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = get_logger(__name__)

LOCAL_RELATION_THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"
MAX_RECORDS_PER_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
LARGE_VAR_TYPES = "spark.sql.execution.arrow.useLargeVarTypes"
_switching = threading.Lock()


class ArrowFrames:
    """Makes DataFrames of Arrow tables in ``spark`` (see the module's docstring).

    Making one calls the JVM (it probes the direct path), so make it where a blocking
    call may run: the batcher makes one per run, in its Spark thread. Threads may share
    it: one lock serialises the calls."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._direct = _DirectPath.probe(spark)

    @property
    def direct(self) -> bool:
        """Whether DataFrames are made with few JVM calls (else by ``createDataFrame``)."""
        return self._direct is not None

    def dataframe(
        self, table: pa.Table, schema: StructType, *, local_relation: bool = False
    ) -> DataFrame:
        """``spark.createDataFrame(table, schema=schema)``; unless ``local_relation``, kept
        as Arrow record batches whatever the table's size."""
        if local_relation:
            return self.spark.createDataFrame(table, schema=schema)
        conf = self.spark.conf
        with _switching:
            before = conf.get(LOCAL_RELATION_THRESHOLD)
            conf.set(LOCAL_RELATION_THRESHOLD, "0")
            try:
                if self._direct is not None:
                    return self._direct.dataframe(table, schema)
                return self.spark.createDataFrame(table, schema=schema)
            finally:
                if before is None:
                    conf.unset(LOCAL_RELATION_THRESHOLD)
                else:
                    conf.set(LOCAL_RELATION_THRESHOLD, before)


class _DirectPath:
    """What ``createDataFrame`` does with an Arrow table, in a handful of JVM calls:
    cast to the schema's Arrow types, write an Arrow stream file, have the JVM read it
    and make the DataFrame."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        utils = jvm(spark).PythonSQLUtils  # class and methods resolved once: a lookup is a JVM call
        self._read_stream = utils.readArrowStreamFromFile
        self._to_dataframe = utils.toDataFrame
        self._session = java_session(spark)
        self._temp_dir = temp_dir(spark)
        self._large_types = spark.conf.get(LARGE_VAR_TYPES) == "true"
        records = int(spark.conf.get(MAX_RECORDS_PER_BATCH) or 0)
        self._chunk = records if records > 0 else None  # 0 or less: no limit, as Spark's

    @classmethod
    def probe(cls, spark: SparkSession) -> _DirectPath | None:
        """The direct path, if this session and PySpark have what it uses: it makes an
        empty DataFrame first. None: use ``createDataFrame``."""
        if not runs_on_jvm(spark):
            return None
        try:
            if encryption_enabled(spark):
                return None
            import pyarrow as pa
            from pyspark.sql.types import LongType, StructField, StructType

            path = cls(spark)
            empty = StructType([StructField("probe", LongType(), nullable=False)])
            table = pa.table({"probe": pa.array([], pa.int64())})
            if path.dataframe(table, empty).schema != empty:
                raise RuntimeError("the probe's DataFrame has another schema")
        except Exception as exc:  # another PySpark: createDataFrame does the same job
            log.info("making DataFrames with createDataFrame: the direct path failed: %s", exc)
            return None
        return path

    def dataframe(self, table: pa.Table, schema: StructType) -> DataFrame:
        import pyarrow as pa
        from pyspark.sql.dataframe import DataFrame
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(
            schema,
            error_on_duplicated_field_names_in_struct=True,
            timezone="UTC",
            prefers_large_types=self._large_types,
        )
        if not table.schema.equals(target):
            table = table.cast(target)
        descriptor, path = tempfile.mkstemp(dir=self._temp_dir, prefix="msgstream-arrow-")
        os.close(descriptor)
        try:
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as out:
                out.write_table(table, max_chunksize=self._chunk)
            batches = self._read_stream(path)  # read at once: then deleted
        finally:
            os.unlink(path)
        frame = self._to_dataframe(batches, schema.json(), self._session)
        return DataFrame(frame, self._spark)
