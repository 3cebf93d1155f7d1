"""The one Spark session of a test run (session-scoped), shared by every Spark test.

Spark runs ``local[2]`` with little memory (see ``msgstream.bridge_spark.session``), its JVM
set up as the demo's is, for a short life (``SHORT_RUN_CONF``): the tests' jobs are small,
and most of the JVM's work is loading and running Spark's code for the first time. Outside
CI a session that cannot start (no Java) skips the Spark tests; with ``CI=true`` it fails
them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from brokers.fixtures import in_ci

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    workdir = tmp_path_factory.mktemp("spark")
    try:
        from msgstream.bridge_spark.session import SHORT_RUN_CONF, local_spark

        session = local_spark(
            app_name="msgstream-tests",
            conf={
                **SHORT_RUN_CONF,
                "spark.sql.warehouse.dir": str(workdir / "warehouse"),
                "spark.local.dir": str(workdir / "local"),
            },
        )
    except Exception as exc:  # any failure to start means the same thing here
        message = f"a local Spark session could not start: {type(exc).__name__}: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    yield session
    session.stop()
