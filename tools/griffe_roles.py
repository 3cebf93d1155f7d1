"""A griffe extension: Sphinx cross-reference roles in docstrings become mkdocstrings links.

The docstrings are written for Sphinx (``:func:`decode```, ``:class:`~msgstream.Config```,
``:meth:`MsgStream.stop <msgstream.streams.stream.MsgStream.stop>```), which mkdocstrings does not
read: its Python handler parses the Sphinx *fields* (``:param:``, ``:raises:``) but leaves
the inline roles as raw text. No maintained griffe extension or mkdocstrings option turns
them into links (griffe's own extensions, ``griffe-sphinx`` and the cross-reference handlers
``mkdocstrings-python-xref`` and ``-betterrefs`` handle attribute comments or relative
Markdown references, not roles), so this module does it when griffe loads the package,
before any docstring is parsed or rendered.

Each role's target is resolved the way Sphinx reads it, relative to the object whose
docstring holds it: a member of that object or of its class, a name its module defines or
imports (griffe's scope resolution), a dotted path, a path inside the package (the source
layout's ``bridge_spark.x`` is the installed ``msgstream.bridge_spark.x``), and, for a
target written with a leading dot or not found otherwise, the one object whose path ends
with it (the nearest to the docstring's module when several do). A target found in the
package becomes an mkdocs-autorefs reference to its canonical path, marked *optional* as
mkdocstrings-python marks the references it writes in signatures: a link where the
object is rendered in the API reference, plain code where it is not (a private helper, a
module no page lists). Markdown's ``[title][identifier]`` form would instead fail the
strict build for every object no page renders. A target outside the package (``asyncio``,
a third-party class) becomes plain code. A target that looks like the package's own but
is found nowhere is logged as a warning, which fails ``mkdocs build --strict``: a stale
reference is caught where it is written.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterator
from typing import Any

import griffe

__all__ = ["ROLE", "SphinxRoles", "rewrite"]

ROLE = re.compile(r":(?:py:)?(?P<role>func|class|meth|mod|data|attr|exc|obj):`(?P<body>[^`]+)`")
"""A Sphinx cross-reference role (the Python domain's, with or without ``py:``)."""

_TITLED = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>\s*$", re.DOTALL)
_log = logging.getLogger("mkdocs.plugins.griffe_roles")
"""Under mkdocs' logger, so that a warning fails ``mkdocs build --strict``."""


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of a loaded package once the whole package is loaded (a
    target may live in any of its modules)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **_: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = rewrite(obj.docstring.value, obj, loader.modules_collection)


def rewrite(text: str, obj: griffe.Object, collection: griffe.ModulesCollection) -> str:
    """``text`` (the docstring of ``obj``) with each role replaced by an optional autoref,
    or by plain code where the target is outside the package."""

    def replace(match: re.Match[str]) -> str:
        role, body = match["role"], match["body"].strip()
        if body.startswith("!"):  # Sphinx's "no link"
            return _code(_title(body[1:]))
        titled = _TITLED.fullmatch(body)
        if titled:
            title, target = titled["title"], titled["target"].strip()
        else:
            title, target = _title(body), body.lstrip("~")
        found = _resolve(target, role, obj, collection)
        if found is None:
            if _looks_internal(target, obj, collection):
                _log.warning("%s: %s role target %r names nothing in the package",
                             obj.path, role, target)  # fmt: skip
            return _code(title)
        return f'<autoref identifier="{html.escape(found)}" optional>{_code(title)}</autoref>'

    return ROLE.sub(replace, text)


def _title(target: str) -> str:
    """What Sphinx shows for an untitled role: no leading dots; after ``~``, the last
    name only."""
    shown = target.lstrip(".")
    return shown[1:].rsplit(".", 1)[-1] if shown.startswith("~") else shown


def _code(title: str) -> str:
    return f"<code>{html.escape(title)}</code>"


def _walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    """``obj`` and every object defined in it (aliases are imports: skipped)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Object):
            yield from _walk(member)


def _lookup(path: str, collection: griffe.ModulesCollection) -> str | None:
    """The canonical path of ``path`` if it names an object griffe loaded, else None."""
    try:
        found = collection.get_member(path)
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    try:
        return str(found.canonical_path) if found is not None else None
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _module_of(obj: griffe.Object) -> griffe.Module:
    module = obj if obj.is_module else obj.module
    assert isinstance(module, griffe.Module)
    return module


def _resolve(
    target: str, role: str, obj: griffe.Object, collection: griffe.ModulesCollection
) -> str | None:
    """The canonical path ``target`` names seen from ``obj``: through ``obj``'s scope
    (its members, its class's, its module's names and imports), as a path, as a path in a
    loaded package, else by its path's end."""
    if not target.startswith("."):
        head, _, rest = target.partition(".")
        scopes = [obj, obj.parent] if obj.parent is not None else [obj]
        for scope in scopes:
            try:
                resolved = scope.resolve(head)
            except griffe.NameResolutionError:
                continue
            found = _lookup(f"{resolved}.{rest}" if rest else resolved, collection)
            if found is not None:
                return found
        for candidate in (target, *(f"{root}.{target}" for root in collection.members)):
            if (found := _lookup(candidate, collection)) is not None:
                return found
    return _by_suffix(target.lstrip("."), role, obj, collection)


def _by_suffix(
    tail: str, role: str, obj: griffe.Object, collection: griffe.ModulesCollection
) -> str | None:
    """The object of the role's kind whose path ends with ``.tail``, the fewest steps from
    ``obj``'s module in the package tree (None when two are as near)."""
    kinds = _KINDS.get(role)
    near = _module_of(obj).path.split(".")
    matches: list[tuple[int, str]] = []
    for root in collection.members.values():
        for candidate in _walk(root):
            if candidate.path.endswith(f".{tail}") and (kinds is None or candidate.kind in kinds):
                parts = candidate.path.split(".")
                common = 0
                while common < min(len(parts), len(near)) and parts[common] == near[common]:
                    common += 1
                matches.append((len(parts) + len(near) - 2 * common, candidate.path))
    if not matches:
        return None
    matches.sort()
    if len(matches) > 1 and matches[0][0] == matches[1][0]:
        return None
    return _lookup(matches[0][1], collection)


_KINDS: dict[str, set[griffe.Kind]] = {
    "mod": {griffe.Kind.MODULE},
    "class": {griffe.Kind.CLASS},
    "exc": {griffe.Kind.CLASS},
    "func": {griffe.Kind.FUNCTION},
    "meth": {griffe.Kind.FUNCTION},
    "attr": {griffe.Kind.ATTRIBUTE},
    "data": {griffe.Kind.ATTRIBUTE, griffe.Kind.TYPE_ALIAS},
}
"""What each role may name when it is found by its path's end (``obj`` names anything)."""


def _looks_internal(target: str, obj: griffe.Object, collection: griffe.ModulesCollection) -> bool:
    """Whether an unresolved target should have been found in the package: not a name the
    module imports from elsewhere, not a known outside module."""
    head = target.lstrip(".").partition(".")[0]
    roots = collection.members
    if target.startswith(".") or head in roots or any(head in r.members for r in roots.values()):
        return True
    module = _module_of(obj)
    if head in module.imports or head in module.members:
        return False  # imported from outside the package (asyncio, aiokafka, ...)
    return head[:1].isupper() or head.startswith("_")
