"""benchmarks/chaos.py (``make chaos``) keeps working: its cheap rocksmq scenarios run with
small counts and print the table's columns."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import chaos


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_the_chaos_table_after_writer_kills_and_a_damaged_wal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert chaos.main(["--small", "--only", "rocksmq-w"]) == 0  # writer-sigkill, wal-garbage
    lines = capsys.readouterr().out.splitlines()
    assert cells(lines[0]) == [
        "fault",
        "messages acknowledged",
        "lost",
        "duplicated",
        "longest time to error",
        "what happened",
    ]
    assert set(lines[1]) <= {"|", "-", ":"}
    kills, wal = cells(lines[2]), cells(lines[3])
    assert len(lines) == 4
    assert kills[0] == "rocksmq writer SIGKILLed mid-produce, 2 times"
    assert int(kills[1]) >= 2 * 300  # each life acknowledged at least 300 sends
    assert kills[2:5] == ["0", "0", "-"]
    assert kills[5].startswith("reopened with ")
    assert wal[0] == "rocksmq: garbage in the write-ahead log after an unclean stop, 9 copies"
    acknowledged, lost = int(wal[1]), int(wal[2])
    assert acknowledged % 9 == 0 and acknowledged >= 9 * 300  # the same sends, 9 copies
    assert wal[3] == "0"
    # What the store does is for tests/test_rocksmq_faults.py to insist on; here, that the
    # row says it consistently: a copy refused with a typed error counts nothing lost, one
    # that opened counts what it misses.
    found = re.fullmatch(
        r"(\d) copies refused at open, (\d) opened missing messages(?: \(damage at [^)]+\))?"
        r"(?:; errors: (\d) StoreCorruptedError)?",
        wal[5],
    )
    assert found is not None, wal[5]
    refused, silent = int(found[1]), int(found[2])
    assert refused + silent <= 9
    assert int(found[3] or 0) == refused
    assert (lost > 0) == (silent > 0)
    assert wal[4] == ("-" if not refused else wal[4])


def test_a_row_counts_errors_and_their_longest_time() -> None:
    row = chaos.Row("fault", acknowledged=10, lost=2, duplicated=1, outcome="done")
    row.failed("BackendUnavailableError", 2.004)
    row.failed("BackendUnavailableError", 1.5)
    row.failed("StoreError", 0.1)
    assert row.cells() == [
        "fault",
        "10",
        "2",
        "1",
        "2.00 s",
        "done; errors: 2 BackendUnavailableError, 1 StoreError",
    ]
    assert chaos.table([row]).splitlines()[2] == (
        "| fault |                    10 |    2 |          1 |                2.00 s "
        "| done; errors: 2 BackendUnavailableError, 1 StoreError |"
    )
