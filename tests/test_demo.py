"""``msgstream demo``: produce a collection, ingest it with Spark across a crash, verify."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from msgstream.bridge_spark import ParquetSink
from msgstream.bridge_spark.cli import demo
from msgstream.cli.main import main
from spark.sessions import spark as spark  # the shared session fixture

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

FINAL_LINE = re.compile(
    r"^demo: rows=(\d+) deletes=(\d+) batches=(\d+) lost=(\d+) duplicated=(\d+) rows_per_s=(\d+)$"
)
SMALL = ["--rows", "2000", "--batch-rows", "300", "--seed", "1"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spark: SparkSession) -> None:
    for var in list(os.environ):
        if var.startswith("MSGSTREAM_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))


def final_line(out: str) -> tuple[int, ...]:
    lines = out.rstrip("\n").splitlines()
    match = FINAL_LINE.fullmatch(lines[-1])
    assert match is not None, f"bad final line: {lines[-1]!r}"
    assert sum(1 for line in lines if line.startswith("demo:")) == 1
    return tuple(map(int, match.groups()))


def test_demo_crashes_resumes_and_loses_or_duplicates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", *SMALL])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows, deletes, batches, lost, duplicated, rate = final_line(out)
    assert rows == 2000
    assert deletes > 0
    assert batches >= 4  # 2000+ rows in batches of at most ~300 (a pack is never split)
    assert (lost, duplicated) == (0, 0)
    assert rate > 0
    assert "crashed batch (redone in phase 2)" in out  # the rich summary table
    # a backlog before ingesting, and rows produced while it runs
    assert re.search(r"rows: backlog / produced while ingesting\s+│\s+1834 / 166 │", out)
    assert re.search(r"unexpected / mismatched content\s+│\s+0 / 0 │", out)
    assert list((tmp_path / "temp").iterdir()) == []  # the temporary store was removed


def test_demo_on_the_memory_backend_keeps_its_output_with_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "memory.yaml"
    config.write_text("mq:\n  type: memory\n", encoding="utf-8")
    work = tmp_path / "work"
    assert main(["demo", "--config", str(config), "--path", str(work), *SMALL]) == 0
    out = capsys.readouterr().out
    assert "msgstream demo (memory)" in out
    assert final_line(out)[3:5] == (0, 0)
    (parquet,) = work.glob("demo-*-parquet")
    assert sorted(p.name for p in parquet.glob("batch_id=*"))[0] == "batch_id=0"
    assert list(work.glob("demo-*-checkpoint.json"))
    assert not (work / "store").exists()  # the memory backend keeps nothing on disk


class Faulty(ParquetSink):
    """The real sink, but batch 1 writes one row too few or one row twice."""

    mode = ""

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if batch_id == 1 and self.mode == "lose":
            first = df.where("_op = 'insert'").first()
            df = df.where(f"NOT (_op = 'insert' AND pk = {first['pk']})")
        elif batch_id == 1 and self.mode == "duplicate":
            df = df.unionByName(df.where("_op = 'insert'").limit(1))
        super().__call__(df, batch_id)


@pytest.mark.parametrize(("mode", "lost", "duplicated"), [("lose", 1, 0), ("duplicate", 0, 1)])
def test_demo_fails_when_a_row_is_lost_or_duplicated(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: str,
    lost: int,
    duplicated: int,
) -> None:
    monkeypatch.setattr(Faulty, "mode", mode)
    monkeypatch.setattr("msgstream.bridge_spark.ParquetSink", Faulty)
    assert main(["demo", *SMALL]) == 1
    out, err = capsys.readouterr()
    assert final_line(out)[3:5] == (lost, duplicated)
    assert "verification failed" in err


def test_demo_times_out_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def never(*args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(3600)

    monkeypatch.setattr(demo, "ingest_phase", never)
    assert main(["demo", "--rows", "100", "--timeout", "1.5"]) == 1
    out, err = capsys.readouterr()
    final_line(out)
    assert "did not finish within 1.5 s" in err
