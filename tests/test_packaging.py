"""The package boundary: importing msgstream pulls in no broker or store library, the
backends and the bridge install under the msgstream namespace only, and the wheel ships
the license and names the project's documents."""

from __future__ import annotations

import email.parser
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import resources
from pathlib import Path

import pytest

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


APACHE_2_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"
"""The MD5 of the Apache License 2.0 as the ASF publishes it (LICENSE-2.0.txt)."""


@pytest.mark.slow
def test_the_wheel_ships_the_license_and_the_project_urls(tmp_path: Path) -> None:
    """Built as a user's ``pip wheel .`` builds it (isolated, from pyproject's build
    requirements), from a copy of the sources: the build writes nothing into the checkout."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", *project["license-files"]):
        shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir",
         str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("msgstream-*.whl")
    dist_info = f"msgstream-{project['version']}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        license_text = archive.read(f"{dist_info}/licenses/LICENSE")
        metadata = email.parser.Parser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
    assert license_text == (ROOT / "LICENSE").read_bytes()
    assert hashlib.md5(license_text, usedforsecurity=False).hexdigest() == APACHE_2_MD5
    assert metadata["License-Expression"] == project["license"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    assert urls == project["urls"]
    assert {"Documentation", "Changelog"} <= urls.keys()
    for path in urls.values():  # no public address yet: paths inside the repository
        assert (ROOT / path).is_file(), path


def test_the_changelog_follows_keep_a_changelog() -> None:
    """An Unreleased section first, then the releases, each version as pyproject has it."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert headings[0] == "## [Unreleased]"
    assert any(h.startswith(f"## [{version}] - ") for h in headings[1:])
    kinds = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    for line in text.splitlines():
        if line.startswith("### "):
            assert line[4:] in kinds, line
