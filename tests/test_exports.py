"""Lazy package exports (:mod:`msgstream.runtime.exports`): declared once, in the packages'
``if TYPE_CHECKING:`` imports, and the same at run time as for the type checker."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msgstream.runtime.exports import exported_names

LAZY_PACKAGES = {
    "msgstream.backends.kafka": "aiokafka",
    "msgstream.backends.pulsar": "pulsar",
    "msgstream.backends.rocksmq": "rocksdict",
    "msgstream.bridge_spark": "pyspark",
}
"""Each package with lazy exports, and the library its names import on first use."""


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_each_export_is_its_modules_object(package: str) -> None:
    module = importlib.import_module(package)
    source = exported_names(Path(module.__file__ or "").read_text(encoding="utf-8"))
    assert module.__all__ == sorted(source)
    assert module.__all__  # a package that lost its block would export nothing
    for name, relative in source.items():
        defining = importlib.import_module(relative, package)
        assert getattr(module, name) is getattr(defining, name), name
        assert name in dir(module)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'Nope'"):
        module.Nope  # noqa: B018


def test_importing_the_packages_imports_none_of_their_libraries() -> None:
    libraries = sorted(set(LAZY_PACKAGES.values()))
    program = textwrap.dedent(
        f"""
        import sys
        for package in {sorted(LAZY_PACKAGES)!r}:
            __import__(package)
        print(sorted(name for name in {libraries!r} if name in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_declaration_is_the_type_checking_block() -> None:
    source = textwrap.dedent(
        """
        from typing import TYPE_CHECKING
        from .elsewhere import NotExported
        if TYPE_CHECKING:
            from collections.abc import Sequence
            from .client import Client as Client
            from ..parent import Up as Up
        """
    )
    assert exported_names(source) == {"Client": ".client", "Up": "..parent"}


def test_an_export_not_in_the_re_exporting_form_is_refused() -> None:
    source = "import typing\nif typing.TYPE_CHECKING:\n    from .client import Client\n"
    with pytest.raises(TypeError) as exc:
        exported_names(source, "pkg/__init__.py")
    assert str(exc.value) == (
        "pkg/__init__.py: write the export as 'from .client import Client as Client'"
    )
