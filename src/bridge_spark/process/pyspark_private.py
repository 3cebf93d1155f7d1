"""The PySpark internals the bridge reads, one function each: the py4j handles on the JVM
side of a session, which no public API gives (see :mod:`msgstream.runtime.library_internals`;
``tests/spark/test_pyspark_internals.py`` checks each on a running session)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgstream.runtime.library_internals import internal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "encryption_enabled",
    "java_context",
    "java_session",
    "jvm",
    "jvm_started",
    "runs_on_jvm",
    "temp_dir",
]

_PYSPARK = "pyspark"


def jvm(spark: SparkSession) -> Any:
    """The py4j view of the session's JVM (``_jvm``): how PySpark reaches Hadoop and
    Spark's own classes."""
    return internal(spark, "_jvm", _PYSPARK)


def java_context(spark: SparkSession) -> Any:
    """The session's ``JavaSparkContext`` (``_jsc``): its Hadoop configuration."""
    return internal(spark, "_jsc", _PYSPARK)


def java_session(spark: SparkSession) -> Any:
    """The JVM ``SparkSession`` behind ``spark`` (``_jsparkSession``)."""
    return internal(spark, "_jsparkSession", _PYSPARK)


def temp_dir(spark: SparkSession) -> str:
    """The local directory PySpark writes the files it hands the JVM into (``_temp_dir``
    of the context)."""
    path: str = internal(spark.sparkContext, "_temp_dir", _PYSPARK)
    return path


def runs_on_jvm(spark: SparkSession) -> bool:
    """Whether ``spark`` has a JVM in this process (a Spark Connect session has none, and
    no ``_jvm``)."""
    return getattr(spark, "_jvm", None) is not None


def encryption_enabled(spark: SparkSession) -> bool:
    """Whether the context encrypts what Python and the JVM exchange
    (``_encryption_enabled``)."""
    return bool(internal(spark.sparkContext, "_encryption_enabled", _PYSPARK))


def jvm_started() -> bool:
    """Whether PySpark started its one JVM of the process already (``SparkContext._gateway``)."""
    from pyspark import SparkContext

    return internal(SparkContext, "_gateway", _PYSPARK) is not None
