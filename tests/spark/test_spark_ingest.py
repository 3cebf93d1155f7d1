"""``msgstream ingest``: the main job, on the embedded store, through the CLI."""

from __future__ import annotations

import asyncio
import io
import re
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest

from msgstream.bridge_spark.cli.ingest import describe_progress
from msgstream.bridge_spark.data.batcher import BatcherProgress
from msgstream.cli.main import main
from msgstream.wire.tso import compose_ts
from spark.data import channel_names, produce_sample, rocksmq_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

FINAL = re.compile(r"^ingest: rows=(\d+) deletes=(\d+) batches=(\d+) rows_per_s=(\d+)$")


def final(out: str) -> tuple[int, ...]:
    match = FINAL.fullmatch(out.rstrip("\n").splitlines()[-1])
    assert match is not None, out
    return tuple(map(int, match.groups()))


def test_ingest_writes_every_row_once_and_resumes(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    config_file = tmp_path / "msgstream.yaml"
    config_file.write_text(f"rocksmq:\n  path: {store}\n", encoding="utf-8")
    config = rocksmq_config(store)
    channels = channel_names("ing", 3)
    first = asyncio.run(produce_sample(config, channels, 500))
    out = tmp_path / "parquet"
    args = ["--config", str(config_file), "ingest", "--out", str(out), "--max-rows", "200"]

    assert main(args) == 0  # every channel of the store
    text = capsys.readouterr().out
    rows, deletes, batches, rate = final(text)
    assert (rows, deletes) == (len(first.inserted), len(first.deleted))
    assert batches >= 3 and rate > 0
    assert "msgstream ingest" in text and "reached end tick" in text

    second = asyncio.run(produce_sample(config, channels, 100, seed=4, create=False))
    assert main([*args, "--max-batches", "1"]) == 0
    assert final(capsys.readouterr().out)[2] == 1
    assert main(args) == 0
    assert main(args) == 0
    assert final(capsys.readouterr().out)[:3] == (0, 0, 0)  # nothing new
    assert main([*args, "--json"]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert (summary["batches"], summary["insert_rows"], summary["delete_rows"]) == (0, 0, 0)
    assert summary["backend"] == "rocksmq" and summary["output"] == str(out)
    assert summary["checkpoint"] == str(out / "_msgstream_checkpoint.json")

    data = spark.read.parquet(str(out)).select("_op", "pk", "batch_id").collect()
    inserted = Counter(r["pk"] for r in data if r["_op"] == "insert")
    assert inserted == Counter(first.inserted) + Counter(second.inserted)
    deleted = Counter(r["pk"] for r in data if r["_op"] == "delete")
    assert deleted == Counter(first.deleted) + Counter(second.deleted)
    ids = sorted({r["batch_id"] for r in data})
    assert ids == list(range(len(ids)))
    assert (out / "_msgstream_checkpoint.json").is_file()


def test_ingest_reports_bad_input(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    config_file = tmp_path / "msgstream.yaml"
    config_file.write_text(f"rocksmq:\n  path: {store}\n", encoding="utf-8")
    channels = channel_names("ingbad", 2)
    asyncio.run(produce_sample(rocksmq_config(store), channels, 20))
    base = ["--config", str(config_file), "ingest", "--out", str(tmp_path / "out")]

    assert main([*base, "--channel", "ingbad-0", "--channel", "ingbad-9"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: channel 'ingbad-9' does not exist on backend 'rocksmq'; "
        "did you mean 'ingbad-1' or 'ingbad-0'?"
    )

    checkpoint = tmp_path / "broken.json"
    checkpoint.write_text("[1, 2", encoding="utf-8")
    assert main([*base, "--checkpoint", str(checkpoint)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith(f"error: checkpoint {checkpoint}: is not valid JSON (")
    )

    assert main([*base, "--max-rows", "10", "--first-batch-rows", "11"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --first-batch-rows: must be at most --max-rows (10), got 11"
    )

    schema = tmp_path / "schema.json"
    schema.write_text('{"name": "demo"}', encoding="utf-8")
    assert main([*base, "--schema", str(schema)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --schema: {schema} is not a collection schema: no 'fields' key"
    )


def test_the_progress_bar_counts_what_is_committed_not_what_was_read_ahead() -> None:
    start, target = compose_ts(1_000, 0), compose_ts(3_000, 0)
    progress = BatcherProgress(start_ts=start, end_ts=target, committed_ts=start, target_ts=target)
    progress.read_rows = 500  # everything read ahead, nothing written yet
    done, detail = describe_progress(progress, now_ms=5_000)
    assert done == 0.0
    assert detail.startswith("committed: batches 0  rows 0  deletes 0  ")
    assert detail.endswith("in flight 500 rows")

    progress.batches, progress.insert_rows, progress.delete_rows = 1, 240, 10
    progress.committed_ts = compose_ts(2_000, 0)  # half of the tick range committed
    done, detail = describe_progress(progress, now_ms=5_000)
    assert done == 0.5
    assert "committed: batches 1  rows 240  deletes 10  " in detail
    assert detail.endswith("in flight 250 rows")


def test_a_following_run_shows_no_percentage_but_how_far_behind_it_is() -> None:
    committed = compose_ts(10_000, 3)
    progress = BatcherProgress(start_ts=committed, end_ts=committed, committed_ts=committed)
    done, detail = describe_progress(progress, now_ms=12_500)
    assert done is None
    assert detail.endswith("in flight 0 rows  2.5 s behind")


def test_what_produce_writes_ingest_reads(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The new user's first afternoon: `produce`, then `ingest`, with no schema by hand."""
    config_file = tmp_path / "msgstream.yaml"
    config_file.write_text(f"rocksmq:\n  path: {tmp_path / 'store'}\n", encoding="utf-8")
    base = ["--config", str(config_file)]
    assert main([*base, "produce", "--channel", "o0", "--channel", "o1", "--count", "250",
                 "--collection", "orders"]) == 0  # fmt: skip
    rows = '{"id": 1, "name": "a", "price": 2.0}\n{"id": 2, "price": 2.5}\nnot json\n'
    monkeypatch.setattr(sys, "stdin", io.StringIO(rows))
    assert main([*base, "produce", "--channel", "p0", "--collection", "prices"]) == 2
    capsys.readouterr()

    out = tmp_path / "orders"
    assert main([*base, "ingest", "--out", str(out), "--channel", "o0", "--channel", "o1"]) == 0
    assert final(capsys.readouterr().out)[:2] == (250, 0)
    data = spark.read.parquet(str(out)).select("id", "text", "_op").collect()
    assert sorted(r["id"] for r in data) == list(range(250))
    assert {r["text"] for r in data} == {f"row-{i}" for i in range(250)}

    prices = tmp_path / "prices"
    assert main([*base, "ingest", "--out", str(prices), "--channel", "p0"]) == 0
    assert final(capsys.readouterr().out)[:2] == (2, 0)
    got = sorted(
        (r["id"], r["name"], r["price"])
        for r in spark.read.parquet(str(prices)).select("id", "name", "price").collect()
    )
    assert got == [(1, "a", 2.0), (2, None, 2.5)]
