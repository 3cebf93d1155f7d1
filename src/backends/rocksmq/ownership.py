"""Who owns a shared rocksmq store, and the socket through which the others reach it.

The owner is the process holding an exclusive ``flock`` on ``<store>/owner.lock``: the
kernel drops it however that process ends (exit, crash, SIGKILL), so the next process to
try takes it. The lock file also says who holds it (pid and ``sharing`` mode) for error
messages; it is only ever read as a hint.

The owner serves ``<store>/owner.sock``, a Unix domain socket: no network port. It is
bound under a temporary name, given mode 0600 and only then renamed into place, so
nobody ever sees it with looser permissions; a stale one (its owner was killed) is
removed by the next owner, which holds the lock. Both ends check the other's user with
``SO_PEERCRED``: a connection from (or to) another user is refused. A store path too long
for a socket address (108 bytes) is reached through ``/proc/self/fd/N/owner.sock``, ``N``
an open descriptor of the store's directory.

``flock`` locks and sockets are shared with a ``fork()``-ed child; :func:`forget_in_child`
(called after a fork) closes the child's copies, so a child never keeps a dead owner's
lock held or its socket accepting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import struct
import threading
import weakref
from dataclasses import dataclass
from typing import Protocol

import orjson

from .errors import StorePathError

LOCK_NAME = "owner.lock"
SOCKET_NAME = "owner.sock"
_MAX_ADDRESS = 107
"""Bytes of a socket path that fit ``sockaddr_un`` (108, with the terminating NUL)."""
_MAX_PID = 2**22
_PEERCRED = struct.Struct("3i")


class _Forgettable(Protocol):
    def forget_in_child(self) -> None: ...


_HELD: weakref.WeakSet[_Forgettable] = weakref.WeakSet()
"""What holds locks or sockets in this process (closed in a forked child)."""


def forget_in_child() -> None:
    for held in list(_HELD):
        held.forget_in_child()


os.register_at_fork(after_in_child=forget_in_child)


def remember_for_fork(held: _Forgettable) -> None:
    """Close ``held``'s descriptors in a forked child (see the module doc)."""
    _HELD.add(held)


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """What the lock file says of its holder."""

    pid: int
    sharing: str


class OwnerLock:
    """The lock that makes this process the owner of the store at ``path``."""

    def __init__(self, fd: int, path: str, announced: bool) -> None:
        self._fd: int | None = fd
        self.path = path
        self._announced = announced
        remember_for_fork(self)

    @classmethod
    def try_acquire(cls, path: str, sharing: str, *, announce: bool = True) -> OwnerLock | None:
        """The lock, if no other process holds it; then the file names this process
        (unless not ``announce``: the file is left as it is)."""
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if announce:
            os.ftruncate(fd, 0)
            os.pwrite(fd, orjson.dumps({"pid": os.getpid(), "sharing": sharing}), 0)
        return cls(fd, path, announce)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            if self._announced:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)  # the last descriptor of the file description: the lock goes

    def forget_in_child(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # the parent's descriptor keeps the lock


def read_owner(path: str) -> OwnerInfo | None:
    """Who the lock file says owns the store (None when it says nothing readable)."""
    try:
        with open(os.path.join(path, LOCK_NAME), "rb") as lock:
            data = orjson.loads(lock.read())
        return OwnerInfo(int(data["pid"]), str(data["sharing"]))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


class SocketAddress:
    """The address of the store's socket; :meth:`close` when done with it."""

    def __init__(self, path: str) -> None:
        full = os.path.join(path, SOCKET_NAME)
        self._dir_fd: int | None = None
        # the longest name bound in the directory decides: bind_listener's temporary one
        longest = temporary_name(_MAX_PID)  # the longest name bind_listener binds
        if len(os.fsencode(os.path.join(path, longest))) <= _MAX_ADDRESS:
            self.address = full
        else:
            self._dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self.address = f"/proc/self/fd/{self._dir_fd}/{SOCKET_NAME}"
        self.directory_address = os.path.dirname(self.address)

    def close(self) -> None:
        fd, self._dir_fd = self._dir_fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> SocketAddress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_directory(path: str) -> None:
    """Refuse to share a store whose directory another user could swap files in."""
    info = os.stat(path)
    if info.st_uid != os.getuid():
        raise StorePathError(
            path,
            f"the store's directory belongs to uid {info.st_uid}, not to this process's user "
            f"({os.getuid()}); only its owner may share it",
        )
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise StorePathError(
            path,
            f"the store's directory is writable by every user (mode {stat.filemode(info.st_mode)})"
            "; make it private (chmod 700) to share it",
        )


_binding = threading.Lock()


def temporary_name(pid: int) -> str:
    """The name process ``pid`` binds the socket under before renaming it into place."""
    return f".{SOCKET_NAME}.{pid}"


def bind_listener(path: str) -> socket.socket:
    """A listening socket at the store's address (mode 0600), replacing a stale one.
    Call it only while holding the :class:`OwnerLock`."""
    check_directory(path)
    with SocketAddress(path) as where:
        final = where.address
        temporary = os.path.join(where.directory_address, temporary_name(os.getpid()))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _binding:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                listener.bind(temporary)
                os.chmod(temporary, 0o600)
                os.replace(temporary, final)
            listener.listen(128)
            listener.setblocking(False)
        except BaseException as exc:
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            if isinstance(exc, OSError):
                raise StorePathError(
                    path, f"cannot make the socket other processes attach through: {exc}"
                ) from exc
            raise
    return listener


def remove_socket(path: str) -> None:
    """Remove the store's socket file (its owner is leaving; call it under the lock)."""
    with SocketAddress(path) as where, contextlib.suppress(FileNotFoundError):
        os.unlink(where.address)


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of ``sock``."""
    _, uid, _ = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    )
    return int(uid)
