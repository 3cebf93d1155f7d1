"""``msgstream demo``: produce a collection, ingest it with Spark across a crash, verify."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql import functions as F

from msgstream.bridge_spark import ParquetSink
from msgstream.bridge_spark.cli import demo
from msgstream.cli.main import build_parser, main
from spark.sessions import spark as spark  # the shared session fixture

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

FINAL_LINE = re.compile(
    r"^demo: rows=(\d+) deletes=(\d+) batches=(\d+) lost=(\d+) duplicated=(\d+) rows_per_s=(\d+)$"
)
PHASE_LINE = re.compile(r"^demo: \[(\d)/5\] (.+) in \d+\.\ds$")
PHASES = (
    # what each phase's line says, in order (the backlog and Spark's start may swap)
    r"produced a backlog: rows=1834 deletes=\d+ channels=4",
    r"started Spark master=local\[2\]",
    r"ingest job 1: batches=(\d+) rows=\d+ deletes=\d+ while 166 more rows were produced, "
    r"then batch (\d+) crashed between its write and its commit",
    r"ingest job 2 resumed: batches=\d+ \(redone=1\) rows=\d+ deletes=\d+",
    r"read back: rows=2000 deletes=\d+ batches=\d+ lost=0 duplicated=0 unexpected=0 "
    r"mismatched=0",
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
    assert sum(1 for line in lines if FINAL_LINE.fullmatch(line)) == 1
    return tuple(map(int, match.groups()))


def phases_of(out: str) -> None:
    """The demo said what it was doing: an opening line, then the five phases, each once,
    numbered 1 to 5 in order, before the summary; the crash came after the job's batches."""
    lines = out.splitlines()
    assert lines[0].startswith("demo: producing 2000 rows on 4 "), lines[0]
    said = [PHASE_LINE.fullmatch(line) for line in lines[1:6]]
    assert all(said), lines[1:6]
    assert [int(m[1]) for m in said if m] == [1, 2, 3, 4, 5]
    texts = [m[2] for m in said if m]
    side_by_side = sorted(texts[:2], key=lambda text: not text.startswith("produced"))
    for pattern, text in zip(PHASES, side_by_side + texts[2:], strict=True):
        assert re.fullmatch(pattern, text), (pattern, text)
    job1 = re.fullmatch(PHASES[2], texts[2])
    assert job1 is not None
    assert int(job1[2]) == int(job1[1])  # batches 0..n-1 committed, batch n crashed
    assert sum(1 for line in lines if PHASE_LINE.fullmatch(line)) == 5


def test_demo_crashes_resumes_and_loses_or_duplicates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", *SMALL])
    out, err = capsys.readouterr()
    assert code == 0, err
    phases_of(out)
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
    """The real sink, but batch 1 writes one row too few, one row twice, or one insert
    without its text."""

    mode = ""

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if batch_id == 1 and self.mode:
            first = df.where("_op = 'insert'").first()
            one = f"_op = 'insert' AND pk = {first['pk']}"
            if self.mode == "lose":
                df = df.where(f"NOT ({one})")
            elif self.mode == "duplicate":
                df = df.unionByName(df.where(one))
            elif self.mode == "blank":
                df = df.withColumn("text", F.when(F.expr(one), None).otherwise(F.col("text")))
        super().__call__(df, batch_id)


@pytest.mark.parametrize(
    ("mode", "lost", "duplicated", "mismatched"),
    [("lose", 1, 0, 0), ("duplicate", 0, 1, 0), ("blank", 0, 0, 1)],
)
def test_demo_fails_when_a_row_is_lost_duplicated_or_wrong(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: str,
    lost: int,
    duplicated: int,
    mismatched: int,
) -> None:
    monkeypatch.setattr(Faulty, "mode", mode)
    monkeypatch.setattr("msgstream.bridge_spark.ParquetSink", Faulty)
    assert main(["demo", *SMALL]) == 1
    out, err = capsys.readouterr()
    assert final_line(out)[3:5] == (lost, duplicated)
    assert re.search(rf"unexpected / mismatched content\s+│\s+0 / {mismatched} │", out)
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


def test_a_user_sees_each_phase_and_none_of_sparks_start_up_noise(tmp_path: Path) -> None:
    """``msgstream demo`` in a process of its own, so it starts its own Spark (the other
    tests share the session of the test run): Spark's and the JVM's output -- the
    start-up warnings, the log level banner -- stays off the terminal."""
    temp = tmp_path / "own-temp"  # the fixture's temp directory is this process's only
    temp.mkdir()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("msgstream")), "demo", *SMALL],  # what a user runs
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    phases_of(done.stdout)
    rows, _, _, lost, duplicated, _ = final_line(done.stdout)
    assert (rows, lost, duplicated) == (2000, 0, 0)
    assert not list(temp.glob("msgstream-demo-*"))  # the temporary store was removed


def test_when_spark_cannot_start_the_demo_shows_sparks_own_words(tmp_path: Path) -> None:
    """Its output hidden, Spark's reason for failing is printed from the log (the error
    PySpark raises only says the JVM exited)."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("msgstream")), "demo", "--master", "nowhere"],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 1
    assert "JAVA_GATEWAY_EXITED" in done.stderr  # PySpark's error
    shown = done.stderr.split("lines of Spark's output:\n", 1)[1]
    assert "SparkException: Master must" in shown  # the JVM's own
    assert not list(tmp_path.glob("msgstream-demo-*"))  # the temporary store was removed


@pytest.mark.parametrize(
    ("argv", "quiet"), [(["demo"], True), (["-v", "demo"], False), (["demo", "-v"], False)]
)
def test_verbose_lets_sparks_output_through(argv: list[str], quiet: bool) -> None:
    assert demo.demo_options(build_parser().parse_args(argv)).quiet is quiet


def test_a_failed_demo_shows_the_end_of_sparks_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "spark.log"
    log.write_text("".join(f"line {n}\n" for n in range(100)), encoding="utf-8")
    demo.show_spark_log(log)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"the last {demo.SPARK_LOG_LINES} lines of Spark's output:",
        *(f"line {n}" for n in range(100 - demo.SPARK_LOG_LINES, 100)),
    ]
    demo.show_spark_log(tmp_path / "missing.log")  # no log (a session that ran already)
    demo.show_spark_log(None)  # -v: Spark's output went to stderr
    assert capsys.readouterr().err == ""
