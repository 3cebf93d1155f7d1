"""The README's quick start is a real program: it passes ``mypy --strict`` and runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_typed_api import strict_mypy

README = Path(__file__).resolve().parent.parent / "README.md"


def quick_start() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Embedded (rocksmq, the default)", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no python block under the embedded quick start"
    return match.group(1)


@pytest.mark.slow  # runs mypy over the installed package: once, on 3.11
def test_the_quick_start_type_checks(
    tmp_path: Path, mypy_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "quick_start.py"
    program.write_text(quick_start(), encoding="utf-8")
    out, status = strict_mypy(program, mypy_cache, monkeypatch)
    assert status == 0, out


def test_the_quick_start_runs_and_a_second_run_prints_only_its_own_message(
    tmp_path: Path,
) -> None:
    """Run twice on one store: each run prints the insert it produced (split over the two
    channels by key), and the second does not print the first's again (it acknowledged
    what it read)."""
    program = tmp_path / "quick_start.py"
    program.write_text(quick_start(), encoding="utf-8")

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, str(program)],
            cwd=tmp_path,  # its store is ./data/rocksmq
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        printed = done.stdout.splitlines()
        assert printed, "the quick start printed nothing"
        assert all(re.fullmatch(INSERT_LINE, line) for line in printed), printed
        rows = sum(int(line.rsplit("rows=", 1)[1].rstrip(")")) for line in printed)
        assert rows == 3  # the insert's three rows, over one or both channels
        return printed

    first, second = run(), run()
    assert (tmp_path / "data" / "rocksmq").is_dir()
    assert set(first).isdisjoint(second)  # each line carries its run's timestamp


INSERT_LINE = (
    r"InsertMsg\(msg_id=1, timestamp=\d+, source_id=0, channel='orders-[01]', rows=[123]\)"
)
