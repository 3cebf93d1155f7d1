"""The PySpark internals the bridge reads (through ``bridge_spark.process.pyspark_private``), read
from a running session: an upgrade that moves one fails here, naming PySpark's version and
the attribute."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from msgstream.bridge_spark.process import pyspark_private

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_the_pyspark_internals_are_there(spark: SparkSession) -> None:
    jvm = pyspark_private.jvm(spark)
    assert jvm.java.lang.Integer.parseInt("7") == 7  # a working py4j view of the JVM
    conf = pyspark_private.java_context(spark).hadoopConfiguration()
    assert conf.get("fs.defaultFS") == "file:///"
    java_session = pyspark_private.java_session(spark)
    assert java_session.sparkContext().appName() == spark.sparkContext.appName
    assert os.path.isdir(pyspark_private.temp_dir(spark))
    assert pyspark_private.runs_on_jvm(spark)
    assert pyspark_private.encryption_enabled(spark) is False  # the tests' session's default
    assert pyspark_private.jvm_started()
