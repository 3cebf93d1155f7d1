"""A streaming query on Spark's ``local-cluster`` master, run as its own process by
``test_spark_cluster.py`` (a JVM holds one Spark context, and the tests' session is
``local[2]``): two executor JVMs, so the source's readers are pickled and run there. The
driver's and the executors' JVMs are set up for a short life, as the demo's is."""

from __future__ import annotations

import argparse
import time
from typing import Any

from msgstream.bridge_spark import local_spark
from msgstream.bridge_spark.session import SHORT_RUN_CONF

MASTER = "local-cluster[2,1,1024]"
SHORT_RUN_JVM = SHORT_RUN_CONF["spark.driver.extraJavaOptions"]


def block_managers(spark: Any) -> int:
    """The driver's and the executors' block managers (executor JVMs + 1)."""
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--channels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    args = parser.parse_args()
    spark = local_spark(
        MASTER,
        "msgstream-cluster-test",
        {
            "spark.driver.memory": "512m",
            "spark.driver.extraJavaOptions": SHORT_RUN_JVM,
            "spark.executor.extraJavaOptions": SHORT_RUN_JVM,
        },
    )
    deadline = time.monotonic() + 120
    while block_managers(spark) < 3:
        if time.monotonic() > deadline:
            raise SystemExit("the two executors did not register within 120 s")
        time.sleep(0.5)
    query = (
        spark.readStream.format("msgstream")
        .option("mq.type", "kafka")
        .option("kafka.brokers", args.bootstrap)
        .option("channels", args.channels)
        .option("maxRowsPerTrigger", "300")
        .load()
        .writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    print(f"cluster-query: done, block managers={block_managers(spark)}")
    spark.stop()


if __name__ == "__main__":
    main()
