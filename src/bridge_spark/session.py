"""A local Spark session set up for the bridge (used by the CLI, the demo and tests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

from .process.launcher import worker_python
from .process.pyspark_private import jvm_started

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SMALL_LOCAL_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.stopTimeout": "60s",
    "spark.log.level": "ERROR",
}
"""Settings for a small ``local[2]`` session: little memory, no UI, few partitions."""

SHORT_RUN_CONF: dict[str, str] = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
"""Settings for a session that lives seconds, not hours (the demo): most of its time is
the JVM loading and running Spark's code for the first time, so it compiles with the
quick C1 compiler only (C2's optimised code would pay off only in a long run) and
collects garbage on one thread instead of several competing for a small machine's
cores. They cost peak throughput, so ``ingest`` and the library keep the JVM's
defaults."""


def local_spark(
    master: str = "local[2]",
    app_name: str = "msgstream",
    conf: Mapping[str, str] | None = None,
    warm_runner: bool = True,
    jvm_stderr: IO[Any] | None = None,
    source: bool = True,
) -> SparkSession:
    """Get (or create) a Spark session with the ``msgstream`` source registered (unless
    not ``source``).

    Spark's Python workers run this interpreter (``PYSPARK_PYTHON``, unless it is set),
    so they can import the bridge, through :func:`~bridge_spark.process.launcher.worker_python`'s
    launcher: they import the installed PySpark rather than compiling its zip again and,
    with ``warm_runner``, each streaming query's source runner is forked from a warm
    interpreter (:mod:`~bridge_spark.process.warm_runner`) instead of starting cold. An already
    running session is returned as is (settings that only apply at start-up are then
    ignored).

    ``jvm_stderr`` (a file) takes what Spark's JVM writes to its standard error -- the
    JVM's and Spark's start-up warnings, the log level banner, log4j's console output --
    when this call starts the JVM; by default it shares this process's. Registering the
    source makes Spark look up the Python data sources installed, in a Python worker it
    starts for that: a session that only runs batch jobs (the micro-batcher's) starts
    sooner without it.
    """
    if "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = worker_python(warm=warm_runner)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from .data.source import register

    settings = {**SMALL_LOCAL_CONF, **(conf or {})}
    if jvm_stderr is not None:
        _start_jvm(master, app_name, settings, jvm_stderr)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if source:
        register(spark)
    return spark


def _start_jvm(master: str, app_name: str, settings: Mapping[str, str], stderr: IO[Any]) -> None:
    """Start Spark's JVM with its standard error going to ``stderr``, and a context on it
    (which the session builder then picks up), unless this process has a JVM already:
    PySpark starts one per process and keeps it for every later context.

    ``SparkSession.builder`` has no way to say where the JVM's output goes; PySpark's
    ``launch_gateway`` does (its ``popen_kwargs``), and ``SparkContext`` takes the
    gateway it returns."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if jvm_started():  # PySpark's one JVM of the process
        return
    conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name)
    conf.setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": stderr})  # type: ignore[no-untyped-call]
    SparkContext(conf=conf, gateway=gateway)


def active_spark() -> SparkSession | None:
    """The session already running in this process, if any."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()
