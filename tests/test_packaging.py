"""The package boundary: importing msgstream pulls in no broker or store library, and the
backends and the bridge install under the msgstream namespace only."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("aiokafka", "pulsar", "pyspark", "rocksdict", "msgstream.backends")


def test_import_does_not_load_any_backend_library() -> None:
    probe = (
        "import sys, msgstream, msgstream.cli.main\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_packages_are_typed() -> None:
    for package in ("msgstream", "msgstream.backends", "msgstream.bridge_spark"):
        assert resources.files(package).joinpath("py.typed").is_file()


def test_no_generic_top_level_name_is_installed() -> None:
    for name in ("backends", "bridge_spark"):
        assert importlib.util.find_spec(name) is None, name


def test_the_package_list_names_every_source_package() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {Path(folder): name for name, folder in setuptools["package-dir"].items()}
    found = set()
    for init in (ROOT / "src").rglob("__init__.py"):
        relative = init.parent.relative_to(ROOT)
        for folder, name in folders.items():
            if relative == folder or folder in relative.parents:
                found.add(".".join([name, *relative.relative_to(folder).parts]))
                break
    assert sorted(setuptools["packages"]) == sorted(found)
