"""The package boundary: importing msgstream pulls in no broker or store library."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources


def test_import_does_not_load_any_backend_library() -> None:
    probe = (
        "import sys, msgstream, msgstream.cli.main\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'aiokafka', 'pulsar', 'pyspark', 'rocksdict', 'backends'})\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_packages_are_typed() -> None:
    for package in ("msgstream", "backends"):
        assert resources.files(package).joinpath("py.typed").is_file()
