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


def test_the_quick_start_type_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "quick_start.py"
    program.write_text(quick_start(), encoding="utf-8")
    out, status = strict_mypy(program, tmp_path, monkeypatch)
    assert status == 0, out


def test_the_quick_start_runs(tmp_path: Path) -> None:
    program = tmp_path / "quick_start.py"
    program.write_text(quick_start(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(program)],
        cwd=tmp_path,  # its store is ./data/rocksmq
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "InsertMsg(" in done.stdout
    assert (tmp_path / "data" / "rocksmq").is_dir()
