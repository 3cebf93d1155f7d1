"""The warm runner: one interpreter per Spark driver that has imported the source's
runner once and forks a child for every query (see :mod:`bridge_spark.process.warm_client`).

``python -m msgstream.bridge_spark.process.warm_runner SOCKET PARENT [MODULE ...]`` binds
``SOCKET`` (one runner per socket, under a lock; a stale socket is replaced), imports the
modules it serves (default :data:`~bridge_spark.process.warm_client.WARM_MODULES`), the msgstream
source and the backends' clients, then serves until the driver JVM ``PARENT`` exits
(watched through a pidfd, so Linux only: elsewhere every query runs cold).

A request carries the arguments, environment, working directory and standard streams
of the process Spark started. The runner refuses one whose interpreter or start-up
environment (:func:`~bridge_spark.process.warm_client.shaping_env`) is not its own, or whose
module it does not serve; the client then runs cold. Otherwise it forks: the child takes
the streams, environment, directory and arguments, tells the client its pid and runs
the module as ``__main__``, as ``python -m`` would; its exit status goes back to the
client when it exits. The runner itself starts no thread, so forking it is safe, and
its children are reaped by the kernel (``SIGCHLD`` ignored; the child restores it).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib
import os
import runpy
import select
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .warm_client import (
    EXIT,
    PID,
    REFUSED,
    RUNNER_MODULE,
    STREAMS,
    WARM_MODULES,
    read_request,
    shaping_env,
)

PRELOADED = ("msgstream.bridge_spark.data.source",)
"""What the runner imports before serving besides the modules it serves: what a msgstream
query's runner unpickles. Every installed backend's client and reader access modules are
imported too (:func:`backend_client_modules`): a query's runner opens a client through
its reader access, and importing the Kafka client was a measurable part of every Kafka
query (docs/internals/warm-runner.md)."""
_REQUEST_TIMEOUT_S = 10.0
USAGE = f"python -m {RUNNER_MODULE} SOCKET PARENT_PID [MODULE ...]"


@dataclass(frozen=True, slots=True)
class Job:
    """What a forked child runs, with its connection to the client."""

    conn: socket.socket
    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    fds: list[int]


def refusal(
    request: dict[str, Any], python: str, env: dict[str, str], modules: Sequence[str]
) -> str | None:
    """Why the runner (interpreter ``python``, environment ``env``, serving ``modules``)
    cannot serve ``request`` warm; None when it can."""
    argv = request.get("argv")
    if not (isinstance(argv, list) and len(argv) >= 2 and argv[0] == "-m"):
        return f"not a python -m run: {argv!r}"
    if argv[1] not in modules:
        return f"module {argv[1]!r} is not served warm"
    if request.get("python") != python:
        return f"another interpreter: {request.get('python')!r}"
    asked = request.get("env")
    if not isinstance(asked, dict) or shaping_env(asked) != shaping_env(env):
        return "another interpreter start-up environment"
    if not isinstance(request.get("cwd"), str):
        return "no working directory"
    return None


def backend_client_modules() -> list[str]:
    """The module of every registered backend's client factory and reader access
    (``module:attribute``)."""
    from msgstream.configuration.plugins import backend_specs

    modules = (
        declared.partition(":")[0]
        for spec in backend_specs().values()
        for declared in (spec.client_factory, spec.reader_access)
        if declared is not None
    )
    return list(dict.fromkeys(modules))  # backends share the default reader access


def _import_if_installed(name: str) -> None:
    """Import ``name``, unless its backend's library is not installed; one that fails
    otherwise is noted in the log. Either way a child imports it as it would without a
    runner."""
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # an optional extra that is not installed
    except Exception as exc:  # a broken optional library must not stop the runner
        print(f"warm runner: not preloaded: {name}: {exc!r}", file=sys.stderr)


def _bind(path: str) -> socket.socket | None:
    """The listening socket at ``path``, unless a live runner holds it (None). One lock
    for the directory makes check-and-replace atomic between runners started at once."""
    with open(os.path.join(os.path.dirname(path), "runners.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with probe, contextlib.suppress(OSError):
            probe.connect(path)
            return None  # another runner serves this socket
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(16)
        return listener


def serve(listener: socket.socket, watch: int, python: str, modules: Sequence[str]) -> Job | None:
    """Accept requests until the watched driver exits (None, in the runner) or a child
    is forked (its :class:`Job`, in the child)."""
    own = dict(os.environ)
    while True:
        ready, _, _ = select.select([listener.fileno(), watch], [], [])
        if watch in ready:
            return None
        conn, _ = listener.accept()
        conn.settimeout(_REQUEST_TIMEOUT_S)
        try:
            request, fds = read_request(conn)
        except (OSError, ValueError) as exc:
            print(f"warm runner: bad request: {exc}", file=sys.stderr)
            conn.close()
            continue
        why = refusal(request, python, own, modules)
        if why is not None:
            print(f"warm runner: refused: {why}", file=sys.stderr)
            _close(fds)
            _send_quietly(conn, REFUSED)
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            os.close(watch)
            conn.settimeout(None)
            argv = request["argv"]
            return Job(conn, argv[1], argv[2:], request["env"], request["cwd"], fds)
        _close(fds)
        conn.close()


def _close(fds: Sequence[int]) -> None:
    for fd in fds:
        os.close(fd)


def _send_quietly(conn: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(data)


def become(job: Job) -> None:
    """Turn this forked child into the process the client stands for: its streams,
    environment, directory and arguments, default ``SIGCHLD``; tell the client our pid,
    and die with it if it dies; report the exit status when we exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in zip(STREAMS, job.fds, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.env)
    sys.path[0] = job.cwd  # what python -m puts first
    sys.argv = ["-m", *job.args]
    status = _Status()
    atexit.register(status.report, job.conn)
    job.conn.sendall(PID + os.getpid().to_bytes(4, "big"))
    _start_without_signals(threading.Thread(target=_die_with_client, args=(job.conn, status)))
    try:
        runpy.run_module(job.module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        status.exited(exc.code)
        raise
    status.exited(0)


class _Status:
    """The child's exit status as ``python -m`` would set it, sent to the client at exit."""

    def __init__(self) -> None:
        self.code = 1  # an uncaught exception
        self.reported = False

    def exited(self, code: object) -> None:
        if code is None:
            self.code = 0
        elif isinstance(code, int):
            self.code = code & 0xFF
        else:
            self.code = 1  # a message: python prints it and exits 1

    def report(self, conn: socket.socket) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        self.reported = True
        _send_quietly(conn, EXIT + bytes([self.code]))


def _start_without_signals(thread: threading.Thread) -> None:
    """Start ``thread`` (a daemon) with every signal blocked in it, so that a signal sent
    to the process (the client forwards SIGTERM, say) goes to the main thread. Python runs
    its signal handlers there; one the kernel handed this thread instead would only set a
    flag, and a main thread asleep or blocked in a read would not see it until it woke.
    The thread inherits the mask it starts with: blocked here, restored after."""
    thread.daemon = True
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _die_with_client(conn: socket.socket, status: _Status) -> None:
    """The client sends nothing after its request: anything else before we have reported
    our exit means it is gone (killed by Spark, say), and so must we be."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    if not status.reported:
        os.kill(os.getpid(), signal.SIGKILL)


def main(arguments: Sequence[str]) -> None:
    """``python -m msgstream.bridge_spark.process.warm_runner SOCKET PARENT [MODULE ...]``."""
    if len(arguments) < 2 or not arguments[1].isdigit():
        raise SystemExit(f"usage: {USAGE}; got {list(arguments)!r}")
    path, parent = arguments[0], int(arguments[1])
    modules = tuple(arguments[2:]) or WARM_MODULES
    try:
        watch = os.pidfd_open(parent)
    except (AttributeError, OSError) as exc:
        print(f"warm runner: cannot watch the driver {parent}: {exc}", file=sys.stderr)
        return
    listener = _bind(path)
    if listener is None:
        return
    bound = os.stat(path).st_ino
    try:
        for name in (*modules, *PRELOADED):
            importlib.import_module(name)
        for name in backend_client_modules():
            _import_if_installed(name)
        for name in modules:  # each child runs a fresh __main__ copy, its imports cached
            del sys.modules[name]
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        job = serve(listener, watch, sys.executable, modules)
    except BaseException:
        _unlink_if(path, bound)
        raise
    if job is None:
        _unlink_if(path, bound)
        return
    become(job)


def _unlink_if(path: str, inode: int) -> None:
    """Remove our socket file and its log if empty, unless another runner has replaced
    it."""
    try:
        if os.stat(path).st_ino != inode:
            return
        os.unlink(path)
        log = path[: -len(".sock")] + ".log"
        if os.stat(log).st_size == 0:
            os.unlink(log)
    except OSError:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
