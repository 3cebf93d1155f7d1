"""A package's lazy exports (PEP 562), declared once: its ``if TYPE_CHECKING:`` imports.

A package that must stay light to import (a backend, whose names import a broker library;
the Spark bridge, whose names import PySpark) writes what it exports as relative imports
under ``if TYPE_CHECKING:``, each in the re-exporting form ``from .client import X as X``:
that block is what mypy and IDEs read. At run time the package calls
:func:`lazy_exports` in the ``else:`` branch, which reads the same block from the
package's source and gives ``__all__`` and the module's ``__getattr__`` and ``__dir__``;
a name's module is imported when the name is first used::

    if TYPE_CHECKING:
        from .client import KafkaClient as KafkaClient
    else:
        __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)

Why the block is read rather than a table written beside it: the type checker can only
follow imports, so a table would state every name a second time.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["exported_names", "lazy_exports"]


def exported_names(source: str, where: str = "<package>") -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` blocks of ``source`` import relatively, by the
    relative module it comes from (``{"KafkaClient": ".client"}``). A relative import
    there that is not in the ``X as X`` form is a :class:`TypeError`: mypy would not see
    it as exported, and the two views of the package would differ."""
    found: dict[str, str] = {}
    for node in ast.parse(source, where).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom) or not statement.level:
                continue
            module = "." * statement.level + (statement.module or "")
            for alias in statement.names:
                if alias.asname != alias.name:
                    raise TypeError(
                        f"{where}: write the export as 'from {module} import "
                        f"{alias.name} as {alias.name}'"
                    )
                found[alias.name] = module
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def lazy_exports(
    package: str, init_file: str
) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` of the package ``package`` whose
    ``__init__.py`` is ``init_file``, from its ``if TYPE_CHECKING:`` imports. A name is
    imported from its module on first use and kept in the package (later uses do not
    come here)."""
    modules = exported_names(Path(init_file).read_text(encoding="utf-8"), init_file)

    def __getattr__(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(modules))

    return sorted(modules), __getattr__, __dir__
