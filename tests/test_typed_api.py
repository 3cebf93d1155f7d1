"""Public signatures name their options: a misspelt stream option is a type error under
``mypy --strict`` (and a TypeError naming it at run time), not something accepted and
ignored."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from msgstream import config_from_dict, new_msgstream, new_ttmsgstream


def strict_mypy(program: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """``mypy --strict`` on ``program`` as a user runs it on a script of theirs: against
    the library as installed (the dev install is one mypy can read, see the Makefile), with
    no path pointing into the repository, and ``cache`` as its cache (the ``mypy_cache``
    fixture's, shared). Its report and exit status. mypy raises the
    interpreter's recursion limit for the whole process and leaves it raised; it is put
    back, so later tests see Python's own limit."""
    monkeypatch.delenv("MYPYPATH", raising=False)
    monkeypatch.chdir(program.parent)  # no src/ or pyproject.toml of the repository around
    limit = sys.getrecursionlimit()
    try:
        out, _, status = mypy_api.run(
            [
                "--strict",
                "--cache-dir", str(cache),
                "--config-file", "",
                "--python-version", "3.11",
                "--follow-imports", "silent",  # report the program, not the library's own code
                str(program),
            ]
        )  # fmt: skip
    finally:
        sys.setrecursionlimit(limit)
    return out, status


@pytest.mark.slow  # runs mypy over the installed package: once, on 3.11
def test_a_user_script_is_checked_against_the_installed_package(
    tmp_path: Path, mypy_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mypy --strict`` on a script outside the repository finds msgstream, its backends
    and the Spark bridge (no ``import-not-found``) and checks the calls against them."""
    program = tmp_path / "user_script.py"
    program.write_text(
        textwrap.dedent(
            """
            from msgstream import MsgPack, config_from_dict, new_msgstream
            from msgstream.backends.memory import MemoryStore
            from msgstream.bridge_spark import ParquetSink

            config = config_from_dict({"mq": {"type": "memory"}})
            stream = new_msgstream(config)
            pack: MsgPack = MsgPack.of()
            store = MemoryStore("orders")
            sink = ParquetSink("out")
            wrong: int = store.list_channels()
            """
        )
    )
    out, status = strict_mypy(program, mypy_cache, monkeypatch)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    assert errors == [
        f"{program.name}:11: error: Incompatible types in assignment (expression has type "
        '"list[str]", variable has type "int")  [assignment]'
    ], out


@pytest.mark.slow  # runs mypy over the installed package: once, on 3.11
def test_a_misspelt_option_is_a_type_error(
    tmp_path: Path, mypy_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "program.py"
    program.write_text(
        textwrap.dedent(
            """
            from msgstream import config_from_dict, new_msgstream, new_ttmsgstream

            config = config_from_dict({"mq": {"type": "memory"}})
            good = new_ttmsgstream(config, receive_buffer_size=3, pursuit_lag_s=0)
            bad = new_msgstream(config, receive_bufer_size=3)
            """
        )
    )
    out, status = strict_mypy(program, mypy_cache, monkeypatch)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    assert len(errors) == 1, out
    assert ':6: error: Unexpected keyword argument "receive_bufer_size"' in errors[0]


def test_a_misspelt_option_fails_at_run_time_naming_it() -> None:
    config = config_from_dict({"mq": {"type": "memory"}}, env={})
    with pytest.raises(TypeError, match="receive_bufer_size"):
        new_msgstream(config, receive_bufer_size=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="pursuit_lag"):
        new_ttmsgstream(config, pursuit_lag=1)  # type: ignore[call-arg]
