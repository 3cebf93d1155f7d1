"""The core stays free of Spark: importing msgstream and its CLI loads neither pyspark nor
pyarrow nor the bridge; building the CLI's parser loads only the bridge's command
declarations (it contributes ``ingest`` and ``demo``), never Spark; the bridge ships its
type information."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

HEAVY = ("pyspark", "pyarrow", "py4j", "msgstream.bridge_spark")


def loaded_after(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\n"
        f"print(','.join(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return [name for name in out.stdout.strip().split(",") if name]


def test_importing_the_core_and_its_cli_loads_no_spark() -> None:
    assert loaded_after("import msgstream, msgstream.cli.main") == []


COMMAND_DECLARATIONS = [
    "msgstream.bridge_spark",  # a package whose names load on first use
    "msgstream.bridge_spark.cli",
    "msgstream.bridge_spark.cli.commands",
]


def test_building_the_cli_and_asking_for_help_loads_no_spark() -> None:
    """``ingest --help`` builds the parser from the entry points, which imports the bridge's
    command declarations (and so its package); nothing else of the bridge and no
    pyspark, pyarrow or py4j."""
    code = (
        "import contextlib, io\n"
        "from msgstream.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['ingest', '--help']) == 0\n"
        "    assert main(['demo', '--help']) == 0\n"
        "assert '--out' in out.getvalue() and '--batch-rows' in out.getvalue()\n"
    )
    assert loaded_after(code) == COMMAND_DECLARATIONS


def test_the_bridge_is_typed() -> None:
    assert resources.files("msgstream.bridge_spark").joinpath("py.typed").is_file()
