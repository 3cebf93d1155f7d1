"""Start a Spark query's source runner from a warm interpreter instead of a cold one.

Spark starts the driver-side runner of a Python streaming source
(``python -m pyspark.sql.streaming.python_streaming_source_runner``) as a new process for
every query, and that process spends most of a short query's fixed cost importing
PySpark, pyarrow and msgstream (docs/internals/warm-runner.md). The worker launcher
(:mod:`bridge_spark.process.launcher`) runs this file instead, with the interpreter and arguments
Spark gave it. It asks the warm runner of the same Spark driver
(:mod:`bridge_spark.process.warm_runner`: one process per driver JVM and interpreter set-up,
those modules imported once) to fork a child that runs the module with this process's
arguments, environment, working directory and standard streams, then waits for that
child and exits with its status. Signals it gets are passed on to the child; if it is
killed, the child notices and dies too.

When there is no warm runner yet, it starts one for the next query and runs this one
cold; when the runner cannot be reached or refuses (another interpreter set-up), it runs
cold. Running cold is ``exec`` of the interpreter with the original arguments: exactly
what Spark asked for.

This file is run as a script by ``python -I -S`` (no site packages), so it imports only
the standard library, and little of it: ``json``, ``hashlib``, ``tempfile``,
``subprocess`` and ``contextlib`` would add their import time to every query (a request
is NUL-separated strings, which the OS's own are free of). The runner imports the protocol
from it.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import stat
import struct
import sys
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

SOURCE_RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"
"""The module PySpark runs (``python -m``) as a streaming source's driver-side runner."""
WARM_MODULES = (SOURCE_RUNNER_MODULE,)
"""Modules whose ``python -m`` runs are served warm (Spark runs them as new processes, not
forked from its Python daemon)."""
RUNNER_MODULE = "msgstream.bridge_spark.process.warm_runner"
CLIENT_USAGE = "python -I -S warm_client.py PYTHON ARG [ARG ...] (what Spark gave the launcher)"
STREAMS = (0, 1, 2)
"""The descriptors handed to the child: stdin, stdout, stderr (Spark reads the last two)."""
_LENGTH = struct.Struct("!I")
PID, EXIT, REFUSED = b"P", b"X", b"R"
"""Replies: the child's pid (4 bytes follow), its exit status (1 byte), or a refusal."""
_PID = struct.Struct("!cI")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
MAX_REQUEST_BYTES = 1 << 20
"""The largest request a runner reads (arguments and environment: a few KiB in practice)."""
MAX_SOCKET_PATH = 107
"""The longest path a Unix socket can be bound to on Linux (``sun_path`` is 108 bytes)."""


def shaping_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables an interpreter reads as it starts (``PYTHONPATH``,
    ``PYTHONHASHSEED``, ``PYTHONUNBUFFERED`` ...: all ``PYTHON*`` names without an
    underscore after ``PYTHON``, as CPython names its own) and the locale. A warm child
    inherits its runner's start-up, so runner and request must agree on these;
    ``PYTHON_WORKER_FACTORY_*`` and other per-process variables need not."""
    return {
        key: value
        for key, value in env.items()
        if (key.startswith("PYTHON") and not key.startswith("PYTHON_"))
        or key in ("LANG", "LANGUAGE")
        or key.startswith("LC_")
    }


def socket_path(python: str, parent: int, env: Mapping[str, str]) -> str | None:
    """Where the warm runner for this interpreter set-up under driver JVM ``parent``
    listens: in a directory of the temporary directory (``env``'s ``TMPDIR``, else
    Python's default) that only this user may use; None when that directory cannot be
    made or is not private, or the path is too long for a socket."""
    base = env.get("TMPDIR") or _default_tmp()
    folder = os.path.join(base, f"msgstream-warm-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        found = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        return None
    # A checksum, not a hash: two set-ups that share a name only share a runner that
    # refuses one of them (it compares the set-ups themselves).
    shape = "\0".join([python, *sorted(f"{k}={v}" for k, v in shaping_env(env).items())])
    digest = zlib.crc32(shape.encode("utf-8", "surrogateescape"))
    path = os.path.join(folder, f"{parent}-{digest:08x}.sock")
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def _default_tmp() -> str:
    import tempfile  # only when TMPDIR is not set (see the module's note on imports)

    return tempfile.gettempdir()


def encode_request(argv: Sequence[str], env: Mapping[str, str], cwd: str, python: str) -> bytes:
    """A request: its length, then NUL-separated ``python``, ``cwd``, the number of
    arguments, the arguments and the environment's ``KEY=VALUE`` entries."""
    fields = [python, cwd, str(len(argv)), *argv, *(f"{k}={v}" for k, v in env.items())]
    data = "\0".join(fields).encode("utf-8", "surrogateescape")
    return _LENGTH.pack(len(data)) + data


def decode_request(data: bytes) -> dict[str, Any]:
    """The request :func:`encode_request` made, as ``python``, ``cwd``, ``argv`` and
    ``env``; a ``ValueError`` when it is not one."""
    python, cwd, count, *rest = data.decode("utf-8", "surrogateescape").split("\0")
    argc = int(count)
    if not 0 <= argc <= len(rest):
        raise ValueError(f"a request with {argc} arguments and {len(rest)} fields")
    entries = [entry.partition("=") for entry in rest[argc:]]
    if any(not sep for _, sep, _ in entries):
        raise ValueError("an environment entry without '='")
    env = {key: value for key, _, value in entries}
    return {"python": python, "cwd": cwd, "argv": rest[:argc], "env": env}


def read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request on ``conn`` and the descriptors that came with it (an ``OSError`` or
    ``ValueError`` when it is cut short, malformed or over :data:`MAX_REQUEST_BYTES`)."""
    head, fds, _, _ = socket.recv_fds(conn, _LENGTH.size, len(STREAMS))
    try:
        if len(head) < _LENGTH.size:
            head += _read_exactly(conn, _LENGTH.size - len(head))
        (length,) = _LENGTH.unpack(head)
        if length > MAX_REQUEST_BYTES:
            raise ValueError(f"a request of {length} bytes (at most {MAX_REQUEST_BYTES})")
        request = decode_request(_read_exactly(conn, length))
        if len(fds) != len(STREAMS):
            raise ValueError(f"malformed request with {len(fds)} descriptors")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, fds


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = _read_reply(conn, size)
    if len(data) < size:
        raise ValueError(f"request cut short at {len(data)} of {size} bytes")
    return data


def _run_cold(python: str, argv: Sequence[str]) -> None:
    os.execv(python, [python, *argv])


def _start_runner(python: str, path: str, parent: int) -> None:
    """Start the warm runner for the next query, detached; its errors go to a log beside
    its socket. Not where the runner could not watch the driver (a kernel without
    pidfds): it would exit at once, and every query would start another."""
    os.close(os.pidfd_open(parent))  # an OSError here: no runner
    import subprocess  # only the first query of a driver starts one

    log = path[: -len(".sock")] + ".log"
    with open(log, "ab") as errors:
        subprocess.Popen(
            [python, "-m", RUNNER_MODULE, path, str(parent)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
        )


def _serve_warm(conn: socket.socket, python: str, argv: Sequence[str]) -> int | None:
    """Send the request, pass signals to the child, and return its exit status; None when
    no child was started (refused, or the runner went away first): then run cold."""
    try:
        request = encode_request(argv, os.environ, os.getcwd(), python)
        sent = socket.send_fds(conn, [request], list(STREAMS))
        conn.sendall(request[sent:])
        reply = _read_reply(conn, _PID.size)
    except OSError:
        return None
    if len(reply) < _PID.size or reply[:1] != PID:
        return None
    _, child = _PID.unpack(reply)
    try:
        done = _forward_until_exit(conn, child)
    except OSError:
        done = b""
    # Without a status the child died without saying how (killed by a signal).
    return done[1] if len(done) == 2 and done[:1] == EXIT else 1


def _forward_until_exit(conn: socket.socket, child: int) -> bytes:
    """Pass the signals in :data:`_FORWARDED` on to ``child`` until its exit status (2
    bytes) arrives or the runner closes ``conn``; return what arrived.

    A Python handler that called ``os.kill`` itself would lose a signal that came just
    before the wait for the status began: Python runs handlers between bytecodes, and
    not while blocked in ``recv``. So the handlers only record, through the wakeup
    descriptor Python writes every caught signal's number to, and one ``select`` waits
    for either that or the status."""
    wakeup, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write, warn_on_full_buffer=False)
    for forwarded in _FORWARDED:
        signal.signal(forwarded, _recorded)
    done = bytearray()
    while len(done) < 2:
        ready, _, _ = select.select([conn.fileno(), wakeup], [], [])
        if wakeup in ready:
            for number in os.read(wakeup, 64):
                if number in _FORWARDED:
                    os.kill(child, number)
        if conn.fileno() in ready:
            chunk = conn.recv(2 - len(done))
            if not chunk:
                break
            done += chunk
    return bytes(done)


def _recorded(number: int, frame: object) -> None:
    """The forwarded signals' handler: the wakeup descriptor has their numbers."""


def _read_reply(conn: socket.socket, size: int) -> bytes:
    """Up to ``size`` bytes: fewer when the other end closes first."""
    reply = bytearray()
    while len(reply) < size and (chunk := conn.recv(size - len(reply))):
        reply += chunk
    return bytes(reply)


def main(arguments: Sequence[str]) -> None:
    """``python -I -S warm_client.py PYTHON -m MODULE [ARG ...]``."""
    if len(arguments) < 2:
        raise SystemExit(f"usage: {CLIENT_USAGE}; got {list(arguments)!r}")
    python, argv = arguments[0], list(arguments[1:])
    parent = os.getppid()
    path = socket_path(python, parent, os.environ)
    if path is None:
        _run_cold(python, argv)
        return
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        try:  # noqa: SIM105 -- importing contextlib slows this script's start
            _start_runner(python, path, parent)
        except OSError:
            pass  # no runner: every query runs cold, as before
        _run_cold(python, argv)
        return
    status = _serve_warm(conn, python, argv)
    if status is None:
        conn.close()
        _run_cold(python, argv)
        return
    sys.exit(status)


if __name__ == "__main__":
    main(sys.argv[1:])
