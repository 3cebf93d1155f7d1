"""``msgstream demo``: produce concurrently, consume half, checkpoint, resume, verify."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path

import pytest

from msgstream import TsMsg
from msgstream.cli import demo
from msgstream.cli.main import main

FINAL_LINE = re.compile(
    r"^demo: messages=(\d+) packs=(\d+) lost=(\d+) duplicated=(\d+) msgs_per_s=(\d+)$"
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in list(os.environ):
        if var.startswith("MSGSTREAM_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))


def final_line(out: str) -> re.Match[str]:
    lines = out.rstrip("\n").splitlines()
    match = FINAL_LINE.fullmatch(lines[-1])
    assert match is not None, f"bad final line: {lines[-1]!r}"
    assert sum(1 for line in lines if line.startswith("demo:")) == 1
    return match


def test_demo_small_run_loses_and_duplicates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", "--messages", "600", "--channels", "3", "--seed", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    match = final_line(out)
    messages, packs, lost, duplicated, rate = map(int, match.groups())
    assert messages >= 600
    assert packs > 1
    assert (lost, duplicated) == (0, 0)
    assert rate > 0
    assert "phase 2 (after seek)" in out  # the rich summary table
    assert "rows inserted / deleted" in out
    # the temporary store was removed
    assert list((tmp_path / "temp").iterdir()) == []


def test_demo_with_path_and_keep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert main(["demo", "--messages", "200", "--path", str(store)]) == 0
    final_line(capsys.readouterr().out)
    assert (store / "CURRENT").exists()  # a RocksDB lives there
    assert list(store.glob("demo-*-checkpoint.json"))

    assert main(["demo", "--messages", "100", "--keep"]) == 0
    _, err = capsys.readouterr()
    (kept,) = (tmp_path / "temp").iterdir()
    assert f"kept store and checkpoint in {kept}" in err


def test_demo_honours_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "memory.yaml"
    config.write_text("mq:\n  type: memory\n", encoding="utf-8")
    assert main(["demo", "--config", str(config), "--messages", "300", "--channels", "2"]) == 0
    out = capsys.readouterr().out
    assert "msgstream demo (memory)" in out
    final_line(out)


def test_demo_fails_when_a_message_is_lost(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = demo.DemoState.record_delivered
    dropped: list[object] = []

    def lossy(self: demo.DemoState, msg: TsMsg) -> None:
        if not dropped:
            dropped.append(msg)
            return
        original(self, msg)

    monkeypatch.setattr(demo.DemoState, "record_delivered", lossy)
    assert main(["demo", "--messages", "200"]) == 1
    out, err = capsys.readouterr()
    match = final_line(out)
    assert int(match.group(3)) == 1  # lost
    assert "verification failed" in err


def test_demo_times_out_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def never(*args: object) -> None:
        await asyncio.sleep(3600)

    monkeypatch.setattr(demo, "consume_rest", never)
    assert main(["demo", "--messages", "200", "--timeout", "1.5"]) == 1
    out, err = capsys.readouterr()
    final_line(out)
    assert "did not finish within 1.5 s" in err
