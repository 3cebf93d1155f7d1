"""A local Spark session set up for the bridge (used by the CLI, the demo and tests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .launcher import worker_python

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


def local_spark(
    master: str = "local[2]",
    app_name: str = "msgstream",
    conf: Mapping[str, str] | None = None,
    warm_runner: bool = True,
) -> SparkSession:
    """Get (or create) a Spark session with the ``msgstream`` source registered.

    Spark's Python workers run this interpreter (``PYSPARK_PYTHON``, unless it is set),
    so they can import the bridge, through :func:`~bridge_spark.launcher.worker_python`'s
    launcher: they import the installed PySpark rather than compiling its zip again and,
    with ``warm_runner``, each streaming query's source runner is forked from a warm
    interpreter (:mod:`~bridge_spark.warm_runner`) instead of starting cold. An already
    running session is returned as is (settings that only apply at start-up are then
    ignored).
    """
    if "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = worker_python(warm=warm_runner)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from .source import register

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SMALL_LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def active_spark() -> SparkSession | None:
    """The session already running in this process, if any."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()
