"""The documentation: every page is in the site's navigation and linked from its index, the
README links only files of the repository, and the docstrings' Sphinx roles render as
links (tools/griffe_roles.py), never as raw ``:func:`` text."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import griffe
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RAW_ROLE = re.compile(r":(func|class|meth|mod|data|attr|exc|obj):")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def nav_pages(entries: list[Any]) -> list[str]:
    pages: list[str] = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def markdown_pages() -> set[str]:
    return {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = nav_pages(config["nav"])
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert set(nav) == markdown_pages()


def test_every_page_is_linked_from_the_index() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {target.split("#", 1)[0] for target in LINK.findall(index)}
    assert markdown_pages() - {"index.md"} <= linked
    assert linked <= markdown_pages(), "the index links a page that does not exist"


def test_the_readme_links_only_files_of_the_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = LINK.findall(readme)
    assert targets
    for target in targets:
        assert "://" not in target, target
        path = target.split("#", 1)[0]
        assert (ROOT / path).is_file(), target


FROM_MSGSTREAM = re.compile(r"^\s*from msgstream import (?:\(([^)]*)\)|([^\n]*))", re.MULTILINE)


def test_what_the_docs_and_examples_import_from_msgstream_is_its_user_api() -> None:
    """``msgstream.__all__`` lists the user API: every name the README, the docs pages and
    the examples import from the package root is in it, and every name in it exists."""
    import msgstream

    texts = [ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "examples").rglob("*.py")]
    imported = {
        name.strip()
        for path in texts
        for match in FROM_MSGSTREAM.finditer(path.read_text(encoding="utf-8"))
        for name in re.sub(r"#[^\n]*", "", match.group(1) or match.group(2)).split(",")
        if name.strip()
    }
    assert {"new_msgstream", "InsertMsg", "StopOnSignals"} <= imported
    assert imported <= set(msgstream.__all__)
    assert len(msgstream.__all__) == len(set(msgstream.__all__))
    for name in msgstream.__all__:
        assert getattr(msgstream, name) is not None, name


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 400


# --------------------------------------------------------------------------- roles


def roles_extension() -> ModuleType:
    spec = importlib.util.spec_from_file_location("griffe_roles", ROOT / "tools/griffe_roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLE = {
    "__init__.py": '"""The package; see :mod:`.store` and :class:`~pkg.store.Store`."""\n',
    "store.py": '''"""Stores. :func:`open_store` opens one; :class:`!Gone` is not linked."""

from asyncio import TaskGroup


class Store:
    """A store. :meth:`close` ends it; :meth:`Store.close <pkg.store.Store.close>` too.
    Runs a :class:`TaskGroup` and an :class:`asyncio.Event`."""

    def close(self) -> None:
        """Close; the other side is :meth:`~pkg.other.Reader.read`."""


def open_store() -> Store:
    """A :class:`Store`, whose :attr:`LIMIT` is :data:`pkg.other.LIMIT`."""
    return Store()
''',
    "other.py": '''"""Readers."""

LIMIT = 3
"""How many; see :func:`open_store`, found by its name's end."""


class Reader:
    def read(self) -> None:
        """Read (a :class:`Missing` here is a stale reference)."""
''',
}


@pytest.fixture
def sample(tmp_path: Path) -> griffe.Module:
    package = tmp_path / "pkg"
    package.mkdir()
    for name, text in SAMPLE.items():
        (package / name).write_text(text, encoding="utf-8")
    extension = roles_extension().SphinxRoles()
    loaded = griffe.load("pkg", search_paths=[tmp_path], extensions=griffe.Extensions(extension))
    assert isinstance(loaded, griffe.Module)
    return loaded


def ref(path: str, title: str) -> str:
    return f'<autoref identifier="{path}" optional><code>{title}</code></autoref>'


def test_roles_become_optional_autorefs_to_canonical_paths(sample: griffe.Module) -> None:
    docstring = sample.docstring
    assert docstring is not None
    assert docstring.value == (
        f"The package; see {ref('pkg.store', 'store')} and {ref('pkg.store.Store', 'Store')}."
    )
    store = sample["store"]
    assert store.docstring.value == (
        f"Stores. {ref('pkg.store.open_store', 'open_store')} opens one; "
        "<code>Gone</code> is not linked."
    )
    assert store["Store"].docstring.value == (
        f"A store. {ref('pkg.store.Store.close', 'close')} ends it; "
        f"{ref('pkg.store.Store.close', 'Store.close')} too.\n"
        "Runs a <code>TaskGroup</code> and an <code>asyncio.Event</code>."
    )
    assert store["Store.close"].docstring.value == (
        f"Close; the other side is {ref('pkg.other.Reader.read', 'read')}."
    )
    # LIMIT is in no scope of open_store: found as the one attribute of that name.
    assert store["open_store"].docstring.value == (
        f"A {ref('pkg.store.Store', 'Store')}, whose {ref('pkg.other.LIMIT', 'LIMIT')} is "
        f"{ref('pkg.other.LIMIT', 'pkg.other.LIMIT')}."
    )
    assert sample["other.LIMIT"].docstring.value == (
        f"How many; see {ref('pkg.store.open_store', 'open_store')}, found by its name's end."
    )


def test_a_stale_reference_is_a_warning_naming_it(
    sample: griffe.Module, caplog: pytest.LogCaptureFixture
) -> None:
    """Logged under mkdocs' logger, so ``mkdocs build --strict`` fails on it; a name
    imported from outside the package (``TaskGroup``) or marked ``!`` is no warning."""
    del sample  # loaded (and rewritten) while the fixture was set up
    warnings = [r for r in caplog.get_records("setup") if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["mkdocs.plugins.griffe_roles"]
    assert warnings[0].getMessage() == (
        "pkg.other.Reader.read: class role target 'Missing' names nothing in the package"
    )


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="mkdocs is not installed (the dev extra)")  # fmt: skip
@pytest.mark.slow  # builds the whole site: once, on 3.11
def test_the_built_site_shows_no_raw_role_and_links_the_roles(tmp_path: Path) -> None:
    """The strict build of the whole site (as ``make docs``), into a directory of its own;
    or, when ``BUILT_DOCS_SITE`` names one ``make test`` has just built with ``make
    docs``, that site."""
    built = os.environ.get("BUILT_DOCS_SITE")
    if built:
        site = ROOT / built
        assert (site / "index.html").is_file(), f"no site was built into {site}"
    else:
        site = tmp_path / "site"
        build = subprocess.run(
            [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--quiet",
             "--site-dir", str(site)],
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert build.returncode == 0, build.stderr
    raw = {
        f"{page.relative_to(site)}: {match.group(0)}"
        for page in site.rglob("*.html")
        for match in RAW_ROLE.finditer(page.read_text(encoding="utf-8"))
    }
    assert not raw
    errors = (site / "api" / "errors" / "index.html").read_text(encoding="utf-8")
    # UnknownTypeCodeError's docstring names DecodeError with a role: a link to it now.
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*href="#msgstream\.errors\.DecodeError"'
        r"[^>]*><code>DecodeError</code></a> \(whatever comes from bytes",
        errors,
    )
