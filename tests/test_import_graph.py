"""No import circles in ``src/``: a part never imports its parent back. Folders are layers:
a lower layer never imports a higher one (:data:`LAYERS`). And the core and the Spark
bridge import no specific backend, nor compare a backend's name.

The graph is built from the source (``ast``), not by importing it: every ``import`` and
``from ... import`` statement of every module counts, wherever it stands (under
``TYPE_CHECKING``, inside a function), relative imports resolved against the module's
package. ``from package import name`` is an edge to ``package.name`` when that is a module,
else to the package itself.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path

from msgstream.bridge_spark.process import launcher
from msgstream.layers import LAYER_FOLDERS
from msgstream.observability.logs import get_logger
from msgstream.timetick import stall

SRC = Path(__file__).resolve().parent.parent / "src"
INSTALLED_AS = {
    "msgstream": "msgstream",
    "backends": "msgstream.backends",
    "bridge_spark": "msgstream.bridge_spark",
}
"""Each source folder of ``src/`` and the package it installs as (pyproject's package-dir)."""


def module_names(root: Path) -> dict[str, Path]:
    """Every module under ``root``, by its installed dotted name (a package by its own name)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        parts[0] = INSTALLED_AS[parts[0]]
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return {target for target in found if target in known and target != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules, the first repeated at the end)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle is not None:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle is not None:
                return cycle
    return None


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_names(root)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def test_the_graph_sees_the_backends_and_their_relative_imports() -> None:
    graph = import_graph(SRC)
    assert "msgstream.backends.kafka.client" in graph["msgstream.backends.kafka"]
    assert "msgstream.backends.kafka.producer" in graph["msgstream.backends.kafka.client"]
    assert "msgstream.backends.broker_errors" in graph["msgstream.backends.kafka.failures"]
    assert "msgstream.contract.consumer_base" in graph["msgstream.backends.pulsar.consumer"]


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_src_has_no_import_circles() -> None:
    assert find_cycle(import_graph(SRC)) is None


# ------------------------------------------------------------ the core names no backend

BACKENDS_DIR = SRC / "backends"
NEUTRAL = ("msgstream", "bridge_spark")
"""The source folders that must name no specific backend: the core and the Spark bridge."""


def specific_backends() -> set[str]:
    """The backend packages of ``src/backends`` (each one backend, or one client library
    some backends share), as installed."""
    return {
        f"{INSTALLED_AS['backends']}.{path.parent.name}"
        for path in BACKENDS_DIR.glob("*/__init__.py")
    }


def backend_names() -> set[str]:
    """The names a configuration chooses backends by (``mq.type``)."""
    return {path.parent.name for path in BACKENDS_DIR.glob("*/plugin.py")}


def names_a_backend(module: str, tree: ast.Module, imported: set[str]) -> list[str]:
    """What in ``module`` (parsed: ``tree``; what it imports: ``imported``) names a
    specific backend: an import of one, a string naming one of its modules (a dynamic
    import), or a string equal to a backend's name outside documentation (a comparison
    such as ``backend == "kafka"``, or ``MqConfig(type="rocksmq")``)."""
    packages = specific_backends()
    names = backend_names()
    found = [
        f"{module} imports {target}"
        for target in sorted(imported)
        if any(target == p or target.startswith(f"{p}.") for p in packages)
    ]
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    strings = sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    )
    found += [
        f"{module} line {line}: {text!r}"
        for line, text in strings
        if text in names or any(text.startswith(f"{p}.") for p in packages)
    ]
    return found


def test_the_rule_sees_backend_imports_comparisons_and_dynamic_imports() -> None:
    packages = specific_backends()
    assert {"msgstream.backends.rocksmq", "msgstream.backends.log_client"} <= packages
    assert {"rocksmq", "kafka", "pulsar", "memory"} <= backend_names()
    source = (
        '"""Docstrings may name rocksmq, or "kafka"."""\n'
        "from msgstream.backends.kafka.ids import KafkaMessageID\n"
        'if backend == "kafka":\n'
        '    config.replace(mq=MqConfig(type="rocksmq"))\n'
        'load("msgstream.backends.pulsar.client:PulsarClient")\n'
        'x = "kafka.brokers"\n'
    )
    tree = ast.parse(source)
    imported = {"msgstream.backends.kafka.ids", "msgstream.configuration.config"}
    assert names_a_backend("m", tree, imported) == [
        "m imports msgstream.backends.kafka.ids",
        "m line 3: 'kafka'",
        "m line 4: 'rocksmq'",
        "m line 5: 'msgstream.backends.pulsar.client:PulsarClient'",
    ]


def test_the_core_and_the_bridge_name_no_backend() -> None:
    """Backends are plug-ins: what the core and the Spark bridge need of one is in its
    spec (msgstream.configuration.plugins, msgstream.streams.reader_access), so neither imports a
    specific backend nor compares a backend's name; documentation may name them."""
    modules = module_names(SRC)
    known = set(modules)
    checked, found = 0, []
    for name, path in modules.items():
        if path.relative_to(SRC).parts[0] not in NEUTRAL:
            continue
        tree = ast.parse(path.read_text(), str(path))
        found += names_a_backend(name, tree, imports_of(name, path, known))
        checked += 1
    assert checked > 50  # both folders, their subpackages included
    assert found == []


# ------------------------------------------------------------------- folders are layers

LAYERS: tuple[tuple[str, ...], ...] = (
    ("msgstream.errors", "msgstream.brief", "msgstream.layers"),
    ("msgstream.runtime.*",),
    ("msgstream.configuration.*",),
    ("msgstream.wire.*",),
    ("msgstream.observability.*",),
    ("msgstream.contract.*",),
    ("msgstream.timetick.*",),
    ("msgstream.streams.*",),
    ("msgstream",),
    ("msgstream.cli.*",),
    ("msgstream.bench.*",),
    ("msgstream.backends.*",),
    ("msgstream.bridge_spark.errors",),
    ("msgstream.bridge_spark.process.*",),
    ("msgstream.bridge_spark.data.*",),
    ("msgstream.bridge_spark", "msgstream.bridge_spark.session"),
    ("msgstream.bridge_spark.cli.*",),
)
"""The layers of ``src/``, lowest first: a module imports only from its own layer and the
layers before it. Each layer is its modules: a name, or ``package.*`` for a package and
everything in it (the most specific entry wins). From the bottom: msgstream's root (its
errors, which every layer raises), its layer folders (``msgstream.layers``), the public
API (the package's ``__init__``), the CLI, the benchmark harness, the backends, then the
Spark bridge's root, its layer folders, what it assembles from them, and its commands."""


def layer_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> int | None:
    """The index in ``layers`` of ``module``'s layer (None: in none)."""
    best: tuple[int, int] | None = None  # (length of the entry, layer)
    for index, entries in enumerate(layers):
        for entry in entries:
            package = entry.removesuffix(".*")
            covers = module == package or (
                entry.endswith(".*") and module.startswith(f"{package}.")
            )
            if covers and (best is None or len(package) > best[0]):
                best = (len(package), index)
    return None if best is None else best[1]


def upward_imports(
    graph: Mapping[str, set[str]], layers: Sequence[Sequence[str]] = LAYERS
) -> list[str]:
    """Each import of ``graph`` from a lower layer into a higher one, or of a module in no
    layer, as a sentence naming both modules and their layers."""
    found = []
    for module in sorted(graph):
        here = layer_of(module, layers)
        if here is None:
            found.append(f"{module} is in no layer")
            continue
        for target in sorted(graph[module]):
            there = layer_of(target, layers)
            if there is not None and there > here:
                found.append(
                    f"{module} (layer {layers[here][0]}) imports {target}, "
                    f"of the higher layer {layers[there][0]}"
                )
    return found


def test_a_lower_layer_never_imports_a_higher_one() -> None:
    assert upward_imports(import_graph(SRC)) == []


def test_an_upward_import_and_a_module_in_no_layer_are_found() -> None:
    graph = {
        "msgstream.wire.codec": {"msgstream.errors", "msgstream.streams.stream"},
        "msgstream.streams.stream": {"msgstream.wire.codec"},
        "msgstream.bridge_spark.process.launcher": {"msgstream.bridge_spark.data.source"},
        "msgstream.bridge_spark.data.source": {"msgstream.bridge_spark.process.runner_exit"},
        "msgstream.stray": set(),
    }
    assert upward_imports(graph) == [
        "msgstream.bridge_spark.process.launcher (layer msgstream.bridge_spark.process.*) "
        "imports msgstream.bridge_spark.data.source, of the higher layer "
        "msgstream.bridge_spark.data.*",
        "msgstream.stray is in no layer",
        "msgstream.wire.codec (layer msgstream.wire.*) imports msgstream.streams.stream, "
        "of the higher layer msgstream.streams.*",
    ]


def test_the_most_specific_entry_places_a_module() -> None:
    api, root = layer_of("msgstream"), layer_of("msgstream.layers")
    assert root == 0
    assert layer_of("msgstream.streams.stream") < api < layer_of("msgstream.cli.main")  # type: ignore[operator]
    assert layer_of("msgstream.bridge_spark.session") == layer_of("msgstream.bridge_spark")
    assert layer_of("msgstream.bridge_spark.cli.demo") == len(LAYERS) - 1
    assert layer_of("msgstream.stray") is None


def test_the_layer_folders_are_the_listed_ones_in_order() -> None:
    """Every sub-package of msgstream and of the bridge is a layer folder of
    ``msgstream.layers`` or an area of its own (CLI, bench, backends, the bridge's CLI),
    and the folders come in the same order here and there."""
    folders = [
        entry.removesuffix(".*")
        for entries in LAYERS
        for entry in entries
        if entry.removesuffix(".*") in LAYER_FOLDERS
    ]
    assert folders == list(LAYER_FOLDERS)
    areas = {"msgstream.cli", "msgstream.bench", "msgstream.backends", "msgstream.bridge_spark"}
    packages = {
        name
        for name, path in module_names(SRC).items()
        if path.name == "__init__.py" and name.count(".") == 1
    } | {
        name
        for name, path in module_names(SRC).items()
        if path.name == "__init__.py" and name.startswith("msgstream.bridge_spark.")
    }
    assert packages - {"msgstream.bridge_spark.cli"} == set(LAYER_FOLDERS) | areas


def test_loggers_leave_the_layer_folder_out() -> None:
    """The logger names users configure are the package's areas and module names, not the
    folders the modules sit in."""
    assert get_logger("msgstream.streams.stream").name == "msgstream.stream"
    assert get_logger("msgstream.bridge_spark.data.source").name == "msgstream.bridge_spark.source"
    assert get_logger("msgstream.backends.kafka.client").name == "msgstream.backends.kafka.client"
    assert get_logger("msgstream.cli.main").name == "msgstream.cli.main"
    assert stall.log.name == "msgstream.stall"
    assert launcher.log.name == "msgstream.bridge_spark.launcher"
