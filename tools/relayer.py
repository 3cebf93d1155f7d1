"""Folders are layers: move the flat modules of ``src/msgstream`` and ``src/bridge_spark``
into one sub-package per layer, and rewrite every reference to them (issue 40).

Run from the repository root, on a tree in the flat layout, with the dev install's ruff::

    .venv/bin/python tools/relayer.py          # move, rewrite, format, then --check
    .venv/bin/python tools/relayer.py --check  # only check a moved tree

The move is deterministic and fails, changing nothing, before it starts when the tree is
not what :data:`LAYOUT` describes: a module of ``src/msgstream`` or ``src/bridge_spark``
that is neither moved nor listed in :data:`STAY` (a module added on main since: place it
in :data:`LAYOUT`), uncommitted changes, or a reference it cannot classify: a
``msgstream.x`` that is no module, no name ``msgstream`` exports and no known word
(:data:`NOT_MODULES`), or an import of one. Then it

1. ``git mv``-es each module to its layer package and writes the packages' ``__init__``;
2. rewrites every import (absolute, relative, ``from package import module``), every
   dotted module path (``msgstream.codec`` -> ``msgstream.wire.codec``: in code, strings
   such as entry points, ``module:attribute`` specs, monkeypatch targets and
   ``python -m`` lines, docstrings, Sphinx roles, the API pages' ``::: msgstream.x``, the
   docs, pyproject), the bridge's source-layout spelling (``bridge_spark.warm_client``),
   the short module names of a package's lazy-export table (``"batcher"``), and source
   paths (``src/msgstream/codec.py``) in every tracked text file but the changelog (its
   entries say what the names were then);
3. keeps logger names: a logger name (``logger="msgstream.stall"``, ``getLogger(...)``,
   ``record.name == ...``) is not a module path, and :mod:`msgstream.observability.logs`
   leaves the layer folder out of the names it gives, so ``msgstream.stall`` stays the
   stall logger's name;
4. lists the new packages in pyproject's ``[tool.setuptools] packages``;
5. sorts imports and formats with ruff, and runs the check.

``--check`` fails, naming file and line, on any old module path, old source path or
module path in the source layout's spelling (``bridge_spark.batcher``) left in a tracked
text file (logger names and the span attribute ``msgstream.channels`` excepted), and on
a module file still at its old place or missing from its new one.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

LAYOUT: dict[str, tuple[str, ...]] = {
    "msgstream.runtime": (
        "scope",
        "cooperate",
        "shutdown",
        "exports",
        "library_internals",
    ),
    "msgstream.configuration": (
        "limits",
        "config_keys",
        "config_errors",
        "sections",
        "plugins",
        "config",
    ),
    "msgstream.wire": (
        "tso",
        "position",
        "envelope",
        "buffers",
        "packed",
        "bodies",
        "schema",
        "lazy",
        "messages",
        "plans",
        "codec",
        "batch_encoder",
        "pack",
        "rows",
    ),
    "msgstream.observability": ("observe", "logs", "metrics", "tracing"),
    "msgstream.contract": ("backend", "channels", "consumer_base", "producer_base", "tagged_id"),
    "msgstream.timetick": ("tick_rules", "barrier", "stall"),
    "msgstream.streams": (
        "reader",
        "raw_read",
        "stream",
        "ttstream",
        "emitter",
        "routing",
        "schema_lookup",
        "factory",
        "reader_access",
    ),
    "msgstream.bridge_spark.process": (
        "pyspark_private",
        "warm_client",
        "warm_runner",
        "launcher",
        "runner_exit",
    ),
    "msgstream.bridge_spark.data": (
        "arrays",
        "arrow_frames",
        "batcher",
        "body_shapes",
        "checkpoint",
        "clients",
        "columnar",
        "convert",
        "cursor",
        "dml_rows",
        "feed",
        "frames",
        "offsets",
        "options",
        "planner",
        "schema_lookup",
        "sink",
        "slices",
        "source",
        "subscription",
        "varlen",
        "workload",
    ),
}
"""Each layer package, lowest first within its folder, and the modules it takes from its
parent folder (the order of the layers is :data:`msgstream.layers.LAYER_FOLDERS`)."""

STAY: dict[str, tuple[str, ...]] = {
    "msgstream": ("__init__", "errors", "brief"),
    "msgstream.bridge_spark": ("__init__", "errors", "session"),
}
"""The modules that stay at the top of their folder: each folder's root (its errors, which
every layer imports) and what the package assembles from its layers (``session`` sets up
Spark's process runtime and registers the data source, so it sits above both)."""

DOCSTRINGS: dict[str, str] = {
    "msgstream.runtime": "The asyncio runtime helpers every layer uses: scopes, cooperative "
    "yielding, shutdown\non signals.",
    "msgstream.configuration": "Configuration: the sections, their keys and errors, the "
    "backend plug-in registry\nthat ``mq.type`` chooses from, and the whole ``Config``.",
    "msgstream.wire": "The wire format and the message model: timestamps, positions, the "
    "envelope, the\nbodies, messages, decode plans, the codec and packs.",
    "msgstream.observability": "Observability: the instrumentation hooks, structured "
    "logging, Prometheus metrics and\nOpenTelemetry traces.",
    "msgstream.contract": "The backend contract: what every backend's client, producer and "
    "consumer provide,\nand what they share.",
    "msgstream.timetick": "Time ticks: the per-channel tick rules, the barrier that aligns "
    "channels into packs,\nand stall detection.",
    "msgstream.streams": "Streams: background readers, ``MsgStream`` and ``TtMsgStream``, "
    "routing, the emitter,\nthe factory that builds them from configuration, and reader "
    "access for other processes.",
    "msgstream.bridge_spark.process": "The Spark bridge's process runtime: the launcher of "
    "Spark's Python workers, the warm\nrunner and its client, and how the source's runner "
    "exits.",
    "msgstream.bridge_spark.data": "The Spark bridge's data path: the driver-side "
    "micro-batcher, the streaming source and\nits planner and slices, offsets, "
    "checkpoints, and packs and payloads to Arrow.",
}
"""The docstring of each layer package's ``__init__``."""

LAYERS_MODULE = "src/msgstream/layers.py"
LAYERS_TEXT = '''\
"""The layer folders of msgstream's source, lowest first.

The modules of ``msgstream`` and of its Spark bridge sit in one sub-package per layer of
their import graph; a module imports only from its own layer and the layers before it
(``tests/test_import_graph.py`` holds the order, with the areas around these folders:
the root modules, the public API, the CLI, the benchmark harness, the backends).

A layer folder is a place in the source, not a part of the API users name: loggers leave
it out of their names (:func:`msgstream.observability.logs.logger_name`).
"""

from __future__ import annotations

LAYER_FOLDERS: tuple[str, ...] = (
{folders})
"""Every layer sub-package, lowest first: the core's, then the Spark bridge's."""
'''

LOGS_MODULE = "src/msgstream/observability/logs.py"
LOGS_EDITS: tuple[tuple[str, str], ...] = (
    (
        """Loggers follow the installed module names, so the hierarchy is the package's:
``msgstream`` above ``msgstream.stream``, ``msgstream.ttstream``, ``msgstream.barrier``,
``msgstream.reader``, ``msgstream.stall``, ``msgstream.emitter``, then""",
        """Loggers follow the installed module names, less the layer folder a module sits in (see
:func:`logger_name`), so the hierarchy is the package's:
``msgstream`` above ``msgstream.stream``, ``msgstream.ttstream``, ``msgstream.barrier``,
``msgstream.reader``, ``msgstream.stall``, ``msgstream.emitter``, then""",
    ),
    (
        """import logging

__all__ = ["FIELDS", "fields", "get_logger"]
""",
        """import logging

from ..layers import LAYER_FOLDERS

__all__ = ["FIELDS", "fields", "get_logger", "logger_name"]
""",
    ),
    (
        """def get_logger(name: str) -> logging.Logger:
    \"\"\"The logger ``name`` (a module's ``__name__``), its records carrying :data:`FIELDS`.\"\"\"
    logger = logging.getLogger(name)
""",
        """def logger_name(module: str) -> str:
    \"\"\"The name of ``module``'s logger: the module's name without the layer folder it sits
    in (:data:`~msgstream.layers.LAYER_FOLDERS`), as users configure them:
    ``msgstream.streams.stream`` logs as ``msgstream.stream``.\"\"\"
    package, _, leaf = module.rpartition(".")
    if package in LAYER_FOLDERS:
        return f"{package.rpartition('.')[0]}.{leaf}"
    return module


def get_logger(name: str) -> logging.Logger:
    \"\"\"The logger of the module ``name`` (its ``__name__``; see :func:`logger_name`), its
    records carrying :data:`FIELDS`.\"\"\"
    logger = logging.getLogger(logger_name(name))
""",
    ),
)
"""Exact edits of the logs module once moved (each must match once): logger names leave
out the layer folder."""

SOURCE_DIRS = {"msgstream": "src/msgstream", "msgstream.bridge_spark": "src/bridge_spark"}
"""The installed package of each folder whose modules move, and its source folder."""
INSTALLED_AS = {
    "src/msgstream": "msgstream",
    "src/backends": "msgstream.backends",
    "src/bridge_spark": "msgstream.bridge_spark",
}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".sh", ".pyi"}
TEXT_NAMES = {"Makefile"}
SKIPPED = {"CHANGELOG.md", "tools/relayer.py"}
"""Tracked files neither rewritten nor checked: the changelog's entries say what the
modules were called then; this script names the old layout on purpose."""

NOT_MODULES = {
    "msgstream.backends",  # (also a package) the backends' entry-point group
    "msgstream.commands",  # entry-point group of CLI commands
    "msgstream.bench_baselines",  # entry-point group of bench baselines
    "msgstream.yaml",  # the default configuration file
}
"""Dotted words that start with ``msgstream.`` and name no module of the flat layout."""

SPAN_ATTRIBUTES = {"msgstream.channels"}
"""Span attributes spelt like a module of the flat layout: the word alone, outside an
import, is the attribute (``msgstream.channels.x`` or an import is the module)."""

LOGGER_PROSE: dict[str, tuple[str, ...]] = {
    "src/msgstream/logs.py": (
        "``msgstream`` above ``msgstream.stream``",
        "``msgstream.reader``, ``msgstream.stall``",
        "logs as ``msgstream.stream``",  # (a line the move adds: see LOGS_EDITS)
    ),
    "docs/guide/observability.md": ("WARNING msgstream.stall: ",),
}
"""Lines (by a part of them, per file of the flat layout) whose dotted names are logger
names, in prose: they stay (code's logger names are found by :func:`logger_name_offsets`)."""

DOTTED = re.compile(r"(?<![\w.\-/])(msgstream|bridge_spark)((?:\.[A-Za-z_]\w*)+)")
ESCAPED = re.compile(r"(?<![\w.\-/\\])(msgstream|bridge_spark)((?:\\\.[A-Za-z_]\w*)+)")
"""A dotted path in a regular expression: ``msgstream\\.bridge_spark\\.warm_runner``."""
SOURCE_PATH = re.compile(r"(?<![\w.\-])(src/)?(msgstream|bridge_spark)/(\w+)(\.py|/)")


class RelayerError(Exception):
    """The tree is not what the move expects; nothing was changed (or, in --check, the
    moved tree still names the old layout)."""


# ------------------------------------------------------------------ the names that move


def moves() -> dict[str, str]:
    """Every moved module's installed name in the flat layout -> in the layered one."""
    found: dict[str, str] = {}
    for package, modules in LAYOUT.items():
        parent = package.rpartition(".")[0]
        for module in modules:
            found[f"{parent}.{module}"] = f"{package}.{module}"
    return found


MOVES = moves()
NEW_NAMES = set(MOVES.values())


def source_path(installed: str, package: bool = False) -> Path:
    """The source file of an installed module name (``package``: its ``__init__``)."""
    for prefix, folder in sorted(SOURCE_DIRS.items(), key=lambda kv: -len(kv[0])):
        if installed == prefix or installed.startswith(prefix + "."):
            rest = installed[len(prefix) :].lstrip(".").replace(".", "/")
            base = Path(folder) / rest if rest else Path(folder)
            return base / "__init__.py" if package else base.with_suffix(".py")
    raise RelayerError(f"{installed}: not in {sorted(SOURCE_DIRS)}")


def installed_name(path: Path) -> str | None:
    """The installed module name of a source file under ``src/`` (None elsewhere)."""
    parts = path.with_suffix("").parts
    if len(parts) < 2 or parts[0] != "src":
        return None
    folder = "/".join(parts[:2])
    if folder not in INSTALLED_AS:
        return None
    rest = list(parts[2:])
    if rest and rest[-1] == "__init__":
        rest.pop()
    return ".".join([INSTALLED_AS[folder], *rest])


def all_modules(root: Path) -> set[str]:
    """Every installed module name under ``src/`` (packages by their own name)."""
    return {
        name
        for path in (root / "src").rglob("*.py")
        if (name := installed_name(path.relative_to(root))) is not None
    }


# ------------------------------------------------------------------------- classifying


@dataclass
class Rewriter:
    """Rewrites references in one tree, before the files move (module names are the flat
    layout's, and every file is read at its old path)."""

    root: Path
    modules: set[str]
    """Every module of the flat layout."""
    public: set[str]
    """The names ``msgstream`` exports at the top (``msgstream.Config`` is no module)."""

    def new_name(self, dotted: str) -> str | None:
        """``dotted`` with its longest moved module prefix replaced, or None if it needs no
        change; raises on a ``msgstream.x`` that is no module, package attribute or
        known word."""
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            head = ".".join(parts[:end])
            if head in MOVES:
                return ".".join([MOVES[head], *parts[end:]])
            if head in self.modules or head in NOT_MODULES:
                return None
        raise RelayerError(f"cannot classify {dotted!r}")

    def rewrite_dotted(self, text: str, keep: set[int], where: str) -> str:
        """Every dotted module path of ``text`` in the layered layout, except those that
        start at an offset in ``keep`` (logger names)."""

        def replace(match: re.Match[str]) -> str:
            if match.start() in keep:
                return match.group(0)
            head, tail = match.group(1), match.group(2)
            if match.group(0) in SPAN_ATTRIBUTES and not text.startswith(".", match.end()):
                return match.group(0)
            full = "msgstream" + tail if head == "msgstream" else "msgstream.bridge_spark" + tail
            if head == "msgstream" and tail.split(".")[1] in self.public:
                return match.group(0)  # msgstream.Config, msgstream.__version__
            try:
                new = self.new_name(full)
            except RelayerError as exc:
                raise RelayerError(f"{where}: {exc}") from None
            if new is None:
                return match.group(0)
            return new if head == "msgstream" else new.removeprefix("msgstream.")

        def replace_escaped(match: re.Match[str]) -> str:
            dotted = match.group(0).replace("\\.", ".")
            new = DOTTED.sub(replace, dotted)
            return match.group(0) if new == dotted else new.replace(".", "\\.")

        return ESCAPED.sub(replace_escaped, DOTTED.sub(replace, text))

    def rewrite_paths(self, text: str) -> str:
        """``src/msgstream/codec.py`` and ``msgstream/codec.py`` in the layered layout."""

        def replace(match: re.Match[str]) -> str:
            src, folder, name, end = match.groups()
            package = "msgstream" if folder == "msgstream" else "msgstream.bridge_spark"
            new = MOVES.get(f"{package}.{name}")
            if new is None:
                return match.group(0)
            layer = new.split(".")[-2]
            return f"{src or ''}{folder}/{layer}/{name}{end}"

        return SOURCE_PATH.sub(replace, text)


def logger_name_offsets(source: str, tree: ast.AST) -> set[int]:
    """The offsets in ``source`` of string literals that are logger names: a ``logger=``
    argument, an argument of ``getLogger``/``get_logger``, or what a ``.name`` is compared
    with (``record.name == "msgstream.stall"``)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(node: ast.expr) -> int:
        # the first character inside the quotes (the regex match's start)
        return starts[node.lineno - 1] + len(
            lines[node.lineno - 1].encode()[: node.col_offset].decode()
        )

    names: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in {"getLogger", "get_logger"}:
                names += node.args
            names += [k.value for k in node.keywords if k.arg == "logger"]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "name" for s in sides):
                names += sides
    found = set()
    for node in names:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            start = offset(node)
            quote = source[start : start + 3]
            found.add(start + (3 if quote in ('"""', "'''") else 1))
    return found


# ---------------------------------------------------------------------------- imports


def spelt_relative(from_package: str, target: str) -> str:
    """``target`` as a relative import from inside ``from_package``."""
    here, there = from_package.split("."), target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    if common == 0:
        raise RelayerError(f"{target} is outside {from_package}: no relative import")
    return "." * (len(here) - common + 1) + ".".join(there[common:])


def new_module_of(old: str) -> str:
    return MOVES.get(old, old)


def rewrite_imports(
    source: str, tree: ast.Module, old_module: str | None, is_package: bool, rw: Rewriter
) -> str:
    """``source`` with each import naming a moved module rewritten (relative ones stay
    relative, from the module's new place)."""
    old_package = new_package = ""  # outside src/: no relative import of msgstream
    if old_module is not None:
        new_module = new_module_of(old_module)
        new_package = new_module if is_package else new_module.rpartition(".")[0]
        old_package = old_module if is_package else old_module.rpartition(".")[0]
    lines = source.splitlines(keepends=True)
    edits: list[tuple[ast.stmt, str]] = []  # (statement, replacement)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            segment = ast.get_source_segment(source, node) or ""
            text = segment
            for alias in node.names:
                new = rw.new_name(alias.name) if alias.name.startswith("msgstream") else None
                if new is not None:
                    text = re.sub(rf"(?<![\w.]){re.escape(alias.name)}(?![\w])", new, text)
            if text != segment:
                edits.append((node, text))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if old_module is None:
                continue  # tests/, benchmarks/: their own modules, not msgstream's
            parts = old_package.split(".")
            base_parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if not (base == "msgstream" or base.startswith("msgstream.")):
            continue
        groups: dict[str, list[ast.alias]] = {}
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            if candidate in rw.modules:
                new_base = new_module_of(candidate).rpartition(".")[0]
            else:
                new_base = new_module_of(base)
                if base not in rw.modules:
                    raise RelayerError(f"line {node.lineno}: cannot classify import of {base}")
            groups.setdefault(new_base, []).append(alias)
        if list(groups) == [base] and (node.level == 0 or new_package == old_package):
            continue

        def spelt(target: str, level: int = node.level) -> str:
            return spelt_relative(new_package, target) if level else target

        segment = ast.get_source_segment(source, node) or ""
        if len(groups) == 1:
            (target,) = groups
            new_from = spelt(target)
            text, count = re.subn(
                r"^(from\s+)(\.*[\w.]*)(\s+import\b)", rf"\g<1>{new_from}\g<3>", segment
            )
            if count != 1:
                raise RelayerError(f"line {node.lineno}: cannot read {segment!r}")
        else:
            if "#" in segment:
                raise RelayerError(f"line {node.lineno}: a split import with a comment")
            indent = " " * node.col_offset
            statements = []
            for target, aliases in groups.items():
                names = ", ".join(
                    f"{a.name} as {a.asname}" if a.asname else a.name for a in aliases
                )
                statement = f"{indent}from {spelt(target)} import {names}"
                if len(statement) > LINE_LIMIT:  # one name a line; ruff formats it after
                    inner = f",\n{indent}    ".join(names.split(", "))
                    statement = (
                        f"{indent}from {spelt(target)} import (\n{indent}    {inner},\n{indent})"
                    )
                statements.append(statement.removeprefix(indent))
            text = f"\n{indent}".join(statements)
        edits.append((node, text))
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())

    spans = [
        (
            offset(node.lineno, node.col_offset),
            offset(node.end_lineno or 0, node.end_col_offset or 0),
            text,
        )
        for node, text in edits
    ]
    for first, end, text in sorted(spans, reverse=True):
        source = source[:first] + text + source[end:]
    return source


def rewrite_lazy_table(source: str, old_module: str, rw: Rewriter) -> str:
    """In a package ``__init__`` whose modules moved, each string that is a moved child's
    short name (a lazy-export table's ``"batcher"``, ``".batcher"``) spelt from the
    package (``"data.batcher"``)."""
    children = {
        name.rpartition(".")[2]: new
        for name, new in MOVES.items()
        if name.rpartition(".")[0] == old_module
    }
    if not children:
        return source

    def replace(match: re.Match[str]) -> str:
        quote, dot, name = match.groups()
        new = children.get(name)
        if new is None:
            return match.group(0)
        return f"{quote}{dot}{new.removeprefix(old_module + '.')}{quote}"

    return re.sub(r"""(["'])(\.?)(\w+)\1""", replace, source)


LINE_LIMIT = 100
"""ruff's line length (pyproject): a prose line a longer name pushes past it is wrapped."""
_WORD = re.compile(r"(?:`[^`]*`|[^\s`])+")
_NO_JOIN = re.compile(r'- |\* |"""|>>>|:(?:param|raises|returns?|rtype|type|var|ivar)\b')
"""How a line starts that begins something new (a list item, a field), not a paragraph's
next line."""


def prose_lines(tree: ast.Module | None, lines: list[str]) -> set[int]:
    """The 0-based lines of ``lines`` that are prose: a comment alone, or (``tree``: in
    Python) in a docstring."""
    found = {i for i, line in enumerate(lines) if line.lstrip().startswith("# ")}
    for node in ast.walk(tree) if tree is not None else ():
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found |= set(range(node.lineno - 1, node.end_lineno or node.lineno))
    return found


def wrap_long_prose(source: str, path: str) -> str:
    """``source`` (Python, TOML, YAML...) with each docstring or comment line over
    :data:`LINE_LIMIT` wrapped: its
    last words begin the next line of the same paragraph (which may then wrap in turn), or
    a line of their own. Code is left to ``ruff format``."""
    lines = source.split("\n")
    prose = prose_lines(ast.parse(source, path) if path.endswith(".py") else None, lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        if len(line) <= LINE_LIMIT or "noqa" in line or i not in prose:
            i += 1  # code is ruff format's to wrap
            continue
        body = line.lstrip()
        indent = line[: len(line) - len(body)]
        lead = "# " if body.startswith("# ") else ""
        words = [m.group(0) for m in _WORD.finditer(body[len(lead) :])]
        carry: list[str] = []
        while len(words) > 1 and len(indent + lead + " ".join(words)) > LINE_LIMIT:
            carry.insert(0, words.pop())
        if not carry:
            raise RelayerError(f"{path}:{i + 1}: cannot wrap {body[:40]!r}...")
        lines[i] = indent + lead + " ".join(words)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        rest = following.lstrip()
        text = rest[len(lead) :]
        joins = (
            i + 1 in prose
            and len(following) - len(rest) == len(indent)
            and rest.startswith(lead)
            and text.strip() != ""
            and not _NO_JOIN.match(text)
            and not carry[-1].endswith(('"""', "'''"))
        )
        if joins:
            lines[i + 1] = indent + lead + " ".join([*carry, text])
        else:
            lines.insert(i + 1, indent + lead + " ".join(carry))
            prose = {j + 1 if j > i else j for j in prose} | {i + 1}
        i += 1
    return "\n".join(lines)


def split_long_string(source: str, path: str) -> str:
    """``source`` with each string literal that ends past :data:`LINE_LIMIT`, inside
    brackets, split in two at a space (adjacent literals, the second under the first):
    what ``ruff format`` leaves alone (a ``# fmt: skip`` statement, a long literal)."""
    lines = source.split("\n")
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    depth = 0
    splits: list[tuple[int, int, int, str]] = []  # (row, start col, end col, text)
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif (
            token.type == tokenize.STRING
            and depth > 0
            and token.start[0] == token.end[0]
            and len(lines[token.start[0] - 1]) > LINE_LIMIT
            and token.end[1] > LINE_LIMIT
        ):
            splits.append((token.start[0], token.start[1], token.end[1], token.string))
    for row, start, end, text in reversed(splits):
        prefix = re.match(r"[rRbBuU]*", text)
        quote_at = len(prefix.group(0)) if prefix else 0
        head, quote = text[:quote_at], text[quote_at]
        body = text[quote_at + 1 : -1]
        room = LINE_LIMIT - start - len(head) - 2
        cut = body.rfind(" ", 0, room)
        if cut <= 0 or text.startswith(("f", "F")) or quote * 3 in text:
            raise RelayerError(f"{path}:{row}: cannot split a long string literal")
        line = lines[row - 1]
        first = f"{head}{quote}{body[: cut + 1]}{quote}"
        second = " " * start + f"{head}{quote}{body[cut + 1 :]}{quote}"
        lines[row - 1 : row] = [line[:start] + first, second + line[end:]]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ files


def tracked_text_files(root: Path) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.split("\n")
    return [
        Path(name)
        for name in out
        if name
        and name not in SKIPPED
        and (Path(name).suffix in TEXT_SUFFIXES or Path(name).name in TEXT_NAMES)
        and (root / name).is_file()
    ]


def public_names(root: Path) -> set[str]:
    """What ``msgstream`` exports at the top: its ``__all__``, ``__version__``, and what its
    ``__getattr__`` serves (the errors are all in :mod:`msgstream.errors`)."""
    tree = ast.parse((root / "src/msgstream/__init__.py").read_text())
    names = {"__version__", "__all__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names |= {e.value for e in node.value.elts}  # type: ignore[attr-defined]
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names - {"errors"}


def prose_logger_offsets(text: str, path: str) -> set[int]:
    """The offsets of the dotted names on the lines of :data:`LOGGER_PROSE` for ``path``."""
    found = set()
    for part in LOGGER_PROSE.get(path, ()):
        at = text.find(part)
        if at < 0:
            continue
        if text.find(part, at + 1) >= 0:
            raise RelayerError(f"{path}: more than once: {part!r}")
        line_start = text.rfind("\n", 0, at) + 1
        line_end = text.find("\n", at)
        found |= {m.start() for m in DOTTED.finditer(text, line_start, line_end)}
    return found


def rewrite_file(root: Path, path: Path, rw: Rewriter) -> str:
    try:
        return _rewrite_file(root, path, rw)
    except RelayerError as exc:
        raise RelayerError(f"{path}: {exc}") from None


def _rewrite_file(root: Path, path: Path, rw: Rewriter) -> str:
    source = (root / path).read_text()
    text = source
    if path.suffix == ".py":
        module = installed_name(path)
        is_package = path.name == "__init__.py"
        tree = ast.parse(text, str(path))
        text = rewrite_imports(text, tree, module, is_package, rw)
        if module is not None and is_package:
            text = rewrite_lazy_table(text, module, rw)
        keep = logger_name_offsets(text, ast.parse(text, str(path)))
    else:
        keep = set()
    keep |= prose_logger_offsets(text, str(path))
    text = rw.rewrite_paths(rw.rewrite_dotted(text, keep, str(path)))
    if path.suffix != ".md" and text != source:
        text = wrap_long_prose(text, str(path))
    if path.suffix == ".py" and text != source:
        text = split_long_string(text, str(path))
    return text


def check_preconditions(root: Path) -> None:
    """The tree is in the flat layout :data:`LAYOUT` describes, every folder's modules
    placed; else raise naming what is not."""
    problems = []
    for package, folder in SOURCE_DIRS.items():
        placed = set(STAY[package]) | {
            old.rpartition(".")[2] for old in MOVES if old.rpartition(".")[0] == package
        }
        present = {p.stem for p in (root / folder).glob("*.py")}
        problems += [
            f"{folder}/{name}.py: in no layer (add it to LAYOUT or STAY)"
            for name in sorted(present - placed)
        ]
        problems += [f"{folder}/{name}.py: missing" for name in sorted(placed - present)]
    for package in LAYOUT:
        if source_path(package, package=True).parent.exists():
            problems.append(f"{source_path(package, package=True).parent}: exists already")
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    if status.strip():
        problems.append("the work tree has uncommitted changes")
    if problems:
        raise RelayerError("not the flat layout:\n  " + "\n  ".join(problems))


def patch_pyproject(text: str) -> str:
    match = re.search(r"(\[tool\.setuptools\]\npackages = \[\n)(.*?)(\n\])", text, re.S)
    if match is None:
        raise RelayerError("pyproject.toml: no [tool.setuptools] packages list")
    packages = re.findall(r'"([\w.]+)"', match.group(2))
    for name in LAYOUT:  # each after the last listed name it sorts after: no other line moves
        before = [i for i, listed in enumerate(packages) if listed < name]
        packages.insert(before[-1] + 1 if before else 0, name)
    body = "\n".join(f'    "{name}",' for name in packages)
    return text[: match.start(2)] + body + text[match.end(2) :]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True)


def move(root: Path, ruff: str) -> None:
    check_preconditions(root)
    rw = Rewriter(root, all_modules(root), public_names(root))
    rewritten = {path: rewrite_file(root, path, rw) for path in tracked_text_files(root)}
    for path, text in rewritten.items():
        if path.name == "pyproject.toml" and path.parent == Path():
            rewritten[path] = patch_pyproject(text)
    # nothing failed: now change the tree
    for package in LAYOUT:
        init = root / source_path(package, package=True)
        init.parent.mkdir()
        init.write_text(f'"""{DOCSTRINGS[package]}"""\n')
        git(root, "add", str(init.relative_to(root)))
    moves = moved_paths()
    for old_path, new_path in moves.items():
        git(root, "mv", str(old_path), str(new_path))
    for path, text in rewritten.items():
        (root / moves.get(path, path)).write_text(text)
    folders = ",\n".join(f'    "{name}"' for name in LAYOUT) + ",\n"
    (root / LAYERS_MODULE).write_text(LAYERS_TEXT.format(folders=folders))
    logs = (root / LOGS_MODULE).read_text()
    for old_text, new_text in LOGS_EDITS:
        if logs.count(old_text) != 1:
            raise RelayerError(f"{LOGS_MODULE}: expected once: {old_text[:60]!r}...")
        logs = logs.replace(old_text, new_text)
    (root / LOGS_MODULE).write_text(logs)
    git(root, "add", "-A", "src", "tests", "docs", "benchmarks", "examples", "tools")
    git(root, "add", "-u")
    py = [str(p) for p in ("src", "tests", "benchmarks", "examples", "tools")]
    subprocess.run([ruff, "check", "--quiet", "--fix", "--select", "I", *py], cwd=root, check=True)
    subprocess.run([ruff, "format", "--quiet", *py], cwd=root, check=True)
    subprocess.run([ruff, "check", "--quiet", *py], cwd=root, check=True)  # E501 left?
    git(root, "add", "-u")


# ------------------------------------------------------------------------------ check


def check(root: Path) -> list[str]:
    """What in the moved tree still names the flat layout (empty: nothing)."""
    problems = []
    for old, new in MOVES.items():
        if (root / source_path(old)).exists():
            problems.append(f"{source_path(old)}: still there")
        if not (root / source_path(new)).exists():
            problems.append(f"{source_path(new)}: missing")
    old_names = sorted(MOVES, key=len, reverse=True)
    short = "|".join(re.escape(o.removeprefix("msgstream.")) for o in old_names)
    pattern = re.compile(rf"(?<![\w.\-/])(?:msgstream\.)?({short})(?![\w])")
    paths = {
        f"{folder.removeprefix('src/')}/{old.rpartition('.')[2]}.py"
        for old in MOVES
        for package, folder in SOURCE_DIRS.items()
        if old.rpartition(".")[0] == package
    }
    for path in tracked_text_files(root):
        text = (root / path).read_text()
        keep = set()
        if path.suffix == ".py":
            keep = logger_name_offsets(text, ast.parse(text, str(path)))
        old_path = {str(new): old for old, new in moved_paths().items()}.get(str(path))
        keep |= prose_logger_offsets(text, str(old_path or path))
        for match in ESCAPED.finditer(text):  # in a regular expression
            found = pattern.match(match.group(0).replace("\\.", "."))
            if found and found.group(0).startswith(("msgstream.", "bridge_spark.")):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path}:{line}: {match.group(0)}")
        for match in pattern.finditer(text):
            whole = match.group(0)
            if not whole.startswith(("msgstream.", "bridge_spark.")):
                continue  # a bare word: ``codec``, ``plans``
            if match.start() in keep:
                continue
            if whole in SPAN_ATTRIBUTES and not _imported(text, match.start(), match.end()):
                continue
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path}:{line}: {whole}")
        for old_file in paths:
            for found in re.finditer(rf"(?<![\w/]){re.escape(old_file)}", text):
                line = text.count("\n", 0, found.start()) + 1
                problems.append(f"{path}:{line}: {old_file}")
    return problems


def _imported(text: str, start: int, end: int) -> bool:
    """The dotted name at ``text[start:end]`` is a module: imported, or followed by a name."""
    before = text[text.rfind("\n", 0, start) + 1 : start]
    return text.startswith(".", end) or before.rstrip().endswith(("from", "import"))


def moved_paths() -> dict[Path, Path]:
    """Each moved module's source file: its old path -> its new one."""
    return {source_path(old): source_path(new) for old, new in MOVES.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check a moved tree")
    parser.add_argument("--ruff", default=".venv/bin/ruff", help="the ruff to format with")
    args = parser.parse_args(argv)
    root = Path.cwd()
    try:
        if not args.check:
            move(root, args.ruff)
        problems = check(root)
    except RelayerError as exc:
        print(f"relayer: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"relayer: old layout: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
