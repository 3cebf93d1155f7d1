"""Commands as plug-ins: the ``msgstream.commands`` entry points build the CLI.

A test registers commands the way an installed package does: a ``*.dist-info`` directory
with an ``entry_points.txt`` on ``sys.path``, which ``importlib.metadata`` reads."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from msgstream.cli.command import ENTRY_POINT_GROUP
from msgstream.cli.main import main

PLUGIN = """
import argparse

from msgstream.cli.command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--who", default="world")


async def handle(config, args) -> int:
    print(f"hello {args.who} from {config.backend()}")
    return 3


HELLO = Command("hello", "say hello (a test plug-in)", "Say hello.", add_arguments, handle)
FANCY = Command(
    "fancy",
    "needs a library that is not installed",
    "Runs only with the fancy extra.",
    lambda parser: None,
    "acme_fancy_impl:handle",
    install="acme-commands[fancy]",
)
"""

FANCY_IMPL = "import acme_library_that_is_not_installed\n"


@pytest.fixture
def plugin_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Installs (on ``sys.path``) the package ``acme-commands`` declaring three commands:
    one that works, one whose handler needs a missing library, one that cannot load."""
    for var in list(os.environ):
        if var.startswith("MSGSTREAM_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    (tmp_path / "acme_commands.py").write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "acme_fancy_impl.py").write_text(FANCY_IMPL, encoding="utf-8")
    dist = tmp_path / "acme_commands-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-commands\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "hello = acme_commands:HELLO\n"
        "fancy = acme_commands:FANCY\n"
        "broken = acme_missing_module:COMMAND\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_entry_points_list_the_commands_of_the_bridge_rocksmq_and_bench() -> None:
    found = {e.name: e.value for e in entry_points(group=ENTRY_POINT_GROUP)}
    assert found == {
        "bench": "msgstream.bench.command:BENCH",
        "demo": "msgstream.bridge_spark.cli.commands:DEMO",
        "doctor": "msgstream.backends.rocksmq.cli:DOCTOR",
        "ingest": "msgstream.bridge_spark.cli.commands:INGEST",
        "schema": "msgstream.bridge_spark.cli.commands:SCHEMA",
    }


def test_help_lists_core_and_plug_in_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listed = [
        line.split()[0]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("    ") and not line.startswith("     ")  # not a wrapped line
    ]
    assert listed == [
        "produce", "consume", "inspect", "bench", "demo", "doctor", "ingest", "schema"
    ]  # fmt: skip


def test_a_registered_plug_in_appears_in_help_and_runs(
    plugin_package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--help"]) == 0
    assert "hello say hello (a test plug-in)" in " ".join(capsys.readouterr().out.split())
    assert main(["hello", "--who", "tests"]) == 3
    assert capsys.readouterr().out == "hello tests from rocksmq\n"


def test_a_plug_in_whose_handler_needs_a_missing_library_names_what_to_install(
    plugin_package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--help"]) == 0
    assert "fancy needs a library that is not installed" in " ".join(
        capsys.readouterr().out.split()
    )
    assert main(["fancy"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "error: msgstream fancy needs pip install 'acme-commands[fancy]' "
        "(No module named 'acme_library_that_is_not_installed')"
    ]


def test_a_plug_in_that_cannot_load_is_listed_and_exits_2_with_one_line(
    plugin_package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = (
        "cannot load acme_missing_module:COMMAND (package acme-commands): "
        "No module named 'acme_missing_module'"
    )
    assert main(["--help"]) == 0
    assert f"broken (unavailable: {problem})" in " ".join(capsys.readouterr().out.split())
    assert main(["broken", "anything"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"error: msgstream broken: {problem}"]


def test_ingest_without_the_spark_extra_names_it(tmp_path: Path) -> None:
    """Without PySpark ``ingest`` is still listed; running it exits 2 with one line."""
    probe = (
        "import sys\n"
        "class NotInstalled:  # as if the spark extra were not installed\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.partition('.')[0] in ('pyspark', 'pyarrow', 'py4j'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "from msgstream.cli.main import main\n"
        "assert main(['--help']) == 0\n"
        "sys.exit(main(['ingest', '--out', 'parquet']))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSGSTREAM_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 2
    assert "ingest channels into Parquet with Spark" in run.stdout
    assert run.stderr.splitlines() == [
        "error: msgstream ingest needs pip install 'msgstream[spark]' (No module named 'pyspark')"
    ]
