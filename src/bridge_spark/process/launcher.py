"""A Python for Spark's Python workers that starts without what Spark's path costs them.

Spark starts every Python worker process with ``PYTHONPATH`` beginning with
``$SPARK_HOME/python/lib/pyspark.zip`` and ending with the jar holding Spark's own
classes (its ``PythonWorkerFactory`` and ``PythonUtils.sparkPythonPath``), and nothing a
user sets comes before them. Both cost every new worker process time:

- Python keeps no compiled bytecode for modules imported from a zip, so every new worker
  compiles PySpark's modules again. Most workers are forked from a daemon that did that
  once, but the driver-side runner of a Python *streaming* source is a new process for
  every query, and compiling them was most of a short query's fixed cost
  (docs/internals/spark.md).
- The first ``importlib.metadata`` lookup in a process (entry points: pydantic's plugins
  when the first model class is made, msgstream's backends) reads the central directory
  of every archive on the path. The jar is 16 MB with about 6,000 entries, which made
  that first lookup many times slower in every new worker.

When PySpark is pip-installed, ``SPARK_HOME`` is the installed package itself: the zip is
a copy of the modules beside it (the same release, checked here by comparing their
``version.py``), and the jar is ``jars/spark-core_*.jar`` inside it, which holds no Python
module (checked by listing it). :func:`worker_python` then writes a small POSIX shell
launcher that drops exactly those entries from ``PYTHONPATH`` and runs this interpreter,
which finds the very same PySpark in site-packages with its bytecode cached. Pointing
``PYSPARK_PYTHON`` at the launcher (what :func:`~bridge_spark.session.local_spark` does
unless it is set) is all it takes; any other Spark installation gets the interpreter
unchanged.

The launcher lives in the user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``,
under ``msgstream/worker-python/``), named by a digest of what it contains, and is
rewritten only when missing or different. It exists on this host only: on a cluster,
leave ``PYSPARK_PYTHON`` to the cluster's own Python (docs/guide/spark.md).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import zipfile
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

from msgstream.observability.logs import get_logger

from .warm_client import WARM_MODULES

log = get_logger(__name__)

__all__ = [
    "installed_pyspark_zip",
    "launcher_script",
    "moduleless_spark_jar",
    "warm_client",
    "worker_python",
]

_ZIP_IN_PACKAGE = Path("python", "lib", "pyspark.zip")
"""Where a pip-installed PySpark keeps the zip Spark puts on its workers' path."""
_CORE_JARS = "jars/spark-core_*.jar"
"""Where a pip-installed PySpark keeps the jar Spark appends to its workers' path."""


def _installed_pyspark() -> Path | None:
    """The directory of the PySpark package this interpreter imports, if any."""
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def installed_pyspark_zip() -> Path | None:
    """The zip Spark would put first on a worker's path, when it only repeats the PySpark
    this interpreter has installed; None when there is no such zip or it differs."""
    package = _installed_pyspark()
    if package is None:
        return None
    archive = package / _ZIP_IN_PACKAGE
    try:
        with zipfile.ZipFile(archive) as opened:
            zipped_version = opened.read("pyspark/version.py")
        installed_version = (package / "version.py").read_bytes()
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        log.debug("no PySpark zip to leave out of workers' path: %s", exc)
        return None
    if zipped_version != installed_version:
        log.debug("%s is another PySpark release than %s; workers keep it", archive, package)
        return None
    return archive


def moduleless_spark_jar() -> Path | None:
    """The jar Spark appends to a worker's path (``jars/spark-core_*.jar`` in the
    installed PySpark), when it holds no Python module; None when there is no single such
    jar, it cannot be read, or it holds a ``.py`` or ``.pyc`` file."""
    package = _installed_pyspark()
    if package is None:
        return None
    found = sorted(package.glob(_CORE_JARS))
    if len(found) != 1:
        log.debug("no single Spark core jar in %s: %s", package, found)
        return None
    [jar] = found
    try:
        with zipfile.ZipFile(jar) as opened:
            names = opened.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        log.debug("Spark's core jar stays on workers' path: %s", exc)
        return None
    if any(name.endswith((".py", ".pyc")) for name in names):
        log.debug("%s holds Python modules; workers keep it", jar)
        return None
    return jar


def launcher_script(python: str, archives: Sequence[Path], client: Path | None = None) -> str:
    """The launcher's text: run ``python`` with ``archives`` (each compared as a file, so
    any path that reaches it counts) left out of ``PYTHONPATH``, every other entry kept in
    order; with ``client`` (:mod:`bridge_spark.process.warm_client`), ``python -m`` runs of the
    modules it serves warm go through it."""
    if not archives and client is None:
        raise ValueError("launcher_script: no archive to leave out and no warm client")
    names = "\n".join(f"archive{n}={shlex.quote(str(a))}" for n, a in enumerate(archives))
    tests = " || ".join(f'[ "$entry" -ef "$archive{n}" ]' for n in range(len(archives)))
    filtered = f"""kept=
some=
set -f
IFS=:
for entry in ${{PYTHONPATH-}}; do
    if {tests}; then continue; fi
    kept="$kept$some$entry"
    some=:
done
unset IFS
set +f
if [ -n "$some" ]; then export PYTHONPATH="$kept"; else unset PYTHONPATH; fi
"""
    warm = ""
    if client is not None:
        modules = "|".join(shlex.quote(f"-m {module}") for module in WARM_MODULES)
        run = f"{shlex.quote(python)} -I -S {shlex.quote(str(client))} {shlex.quote(python)}"
        warm = f"""case "${{1-}} ${{2-}}" in
    {modules}) exec {run} "$@" ;;
esac
"""
    return f"""#!/bin/sh
# Written by msgstream.bridge_spark.process.launcher: a Spark Python worker's interpreter.
# Spark puts PySpark's zip first on PYTHONPATH and its core jar last. The archives below
# repeat the PySpark installed beside them (with compiled bytecode) or hold no Python
# module: they are left out, so nothing is compiled again and no package lookup reads them.
# A streaming source's runner, a new process per query, is forked from a warm interpreter
# by msgstream's warm client when it can be.
{names}
{filtered if archives else ""}{warm}exec {shlex.quote(python)} "$@"
"""


def warm_client() -> Path | None:
    """The warm client script (:mod:`bridge_spark.process.warm_client`), where the platform lets
    its runner watch the driver (Linux pidfds); None elsewhere."""
    if not hasattr(os, "pidfd_open"):
        return None
    return Path(__file__).with_name("warm_client.py")


def _cache_dir() -> Path:
    """``$XDG_CACHE_HOME`` or ``~/.cache``, under ``msgstream/worker-python``; an
    ``OSError`` when neither names an absolute directory (no home to write to)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        raise NotADirectoryError(f"no cache directory: {base!r} is not an absolute path")
    return Path(base, "msgstream", "worker-python")


def worker_python(
    python: str | None = None, cache_dir: Path | None = None, warm: bool = True
) -> str:
    """An executable for ``PYSPARK_PYTHON``: the launcher for ``python`` (default: this
    interpreter) when a pip-installed PySpark's zip or core jar can be left out or, with
    ``warm``, streaming queries' runners can be forked warm (:func:`warm_client`); else
    ``python`` itself. Never raises for a cache directory it cannot write: it logs why
    and returns ``python``; a ``python`` that is not an executable file is a
    ``ValueError`` naming it."""
    python = python or sys.executable
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ValueError(f"worker_python: {python!r} is not an executable file")
    archives = [a for a in (installed_pyspark_zip(), moduleless_spark_jar()) if a is not None]
    client = warm_client() if warm else None
    if not archives and client is None:
        return python
    text = launcher_script(python, archives, client)
    name = f"python-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    try:
        folder = cache_dir if cache_dir is not None else _cache_dir()
        path = folder / name
        if not (path.is_file() and os.access(path, os.X_OK) and path.read_text() == text):
            folder.mkdir(parents=True, exist_ok=True)
            draft = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            draft.write_text(text)
            draft.chmod(0o755)
            draft.replace(path)  # atomic: a concurrent writer writes the same text
    except OSError as exc:
        log.warning(
            "Spark's Python workers start without msgstream's launcher (nothing left out "
            "of their path, no warm runner): %s",
            exc,
        )
        return python
    return str(path)
