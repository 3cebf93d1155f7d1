"""A Spark ingestion job: the orders channels into Parquet, exactly once, with a checkpoint.

The driver-side ``MicroBatcher`` reads the channels of ``producer_service.py`` in
time-tick aligned batches (the schema comes from the collection's ``CreateCollectionMsg``),
hands each batch to Spark as a DataFrame and commits its checkpoint after Spark wrote it.
``ParquetSink`` is idempotent per batch id, so a job that crashed mid-batch and is run
again writes every row exactly once. It ingests what is there when it starts
(``until="available_now"``) and stops; run it again later to pick up what came since.

    python examples/spark_ingest.py --out out/orders --checkpoint state/orders.json

Needs ``pip install 'msgstream[spark]'`` and Java 17+.
"""

from __future__ import annotations

import argparse
import asyncio

from msgstream import load_config
from msgstream.bridge_spark import MicroBatcher, ParquetSink, local_spark

CHANNELS = ["orders-0", "orders-1", "orders-2", "orders-3"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="msgstream YAML file (default: $MSGSTREAM_CONFIG)")
    parser.add_argument("--out", required=True, help="Parquet output directory")
    parser.add_argument("--checkpoint", required=True, help="the job's checkpoint file")
    args = parser.parse_args()

    spark = local_spark()
    try:
        batcher = MicroBatcher(
            spark,
            load_config(args.config),
            CHANNELS,
            args.checkpoint,
            collection="orders",
            frame="inserts",
            max_rows=10_000,
        )
        sink = ParquetSink(args.out)
        progress = asyncio.run(batcher.run(sink))
        total = spark.read.parquet(args.out).count() if progress.batches else 0
        print(
            f"ingested batches={progress.batches} rows={progress.insert_rows} parquet_rows={total}"
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
