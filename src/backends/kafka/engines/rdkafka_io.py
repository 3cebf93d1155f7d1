"""librdkafka's queue IO events for a confluent-kafka ``Producer``: the event loop itself
waits for delivery reports.

librdkafka can write a byte to a file descriptor whenever its main queue (where delivery
reports arrive) goes from empty to non-empty -- ``rd_kafka_queue_io_event_enable``, the
API librdkafka offers for event loops. With it the loop watches the descriptor and serves
the reports with ``Producer.poll(0)``: one wake-up from librdkafka's broker thread to the
loop. Without it a thread must block in ``poll()`` and then wake the loop in turn: a second
wake-up, ~40 µs of a ~120 µs acknowledgement on a local broker.

confluent-kafka does not expose that call, so it is reached through :mod:`ctypes` (no
maintained package offers it either):

- the C library is the one confluent-kafka's extension is linked against: symbols are
  looked up through the extension's own handle, which searches what it loaded;
- the ``rd_kafka_t`` pointer is the first field after the object header of
  confluent-kafka's ``Handle`` struct (``rk``, in that place since confluent-kafka 0.9).

Both are checked before anything is enabled: the binding's major version must be one
whose layout is known (:data:`KNOWN_MAJORS`), the library found must report the version
confluent-kafka reports, and ``rd_kafka_name`` of the pointer must be the producer's name
(``<client.id>#producer-<n>``). On any mismatch :func:`attach` returns None with the reason,
and the engine keeps its delivery thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import socket
from typing import Any

KNOWN_MAJORS = frozenset({"2"})
"""confluent-kafka major versions whose ``Handle`` struct starts with ``rk``."""

_PRODUCER = 0
"""``RD_KAFKA_PRODUCER``."""


@functools.cache
def _library() -> Any:
    """librdkafka as confluent-kafka's extension module loaded it (looked up once)."""
    from confluent_kafka import cimpl

    lib = ctypes.CDLL(cimpl.__file__)
    lib.rd_kafka_version.restype = ctypes.c_int
    lib.rd_kafka_version.argtypes = []
    lib.rd_kafka_name.restype = ctypes.c_char_p
    lib.rd_kafka_name.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_type.restype = ctypes.c_int
    lib.rd_kafka_type.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_queue_get_main.restype = ctypes.c_void_p
    lib.rd_kafka_queue_get_main.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_queue_io_event_enable.restype = None
    lib.rd_kafka_queue_io_event_enable.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_queue_destroy.restype = None
    lib.rd_kafka_queue_destroy.argtypes = [ctypes.c_void_p]
    return lib


class QueueEvents:
    """A producer's main queue signalling through a socket pair: :attr:`fileno` becomes
    readable when reports are waiting. Call :meth:`drained` before serving them with
    ``poll(0)`` (serving re-arms the signal), and :meth:`close` before the producer is
    flushed or dropped."""

    def __init__(self, lib: Any, rk: int) -> None:
        self._lib = lib
        self._receiver, self._sender = socket.socketpair()
        self._receiver.setblocking(False)
        self._sender.setblocking(False)
        self._queue: int | None = lib.rd_kafka_queue_get_main(rk)
        self._payload = ctypes.create_string_buffer(b"!", 1)
        lib.rd_kafka_queue_io_event_enable(self._queue, self._sender.fileno(), self._payload, 1)

    def fileno(self) -> int:
        return self._receiver.fileno()

    def drained(self) -> None:
        """Take the signal off the socket. librdkafka writes one byte per wake-up until the
        queue is served, so one read empties it (a byte left over only means one more
        ``poll(0)`` that finds nothing)."""
        with contextlib.suppress(BlockingIOError, InterruptedError):
            self._receiver.recv(64)

    def close(self) -> None:
        """Stop signalling and give the queue reference back (before the producer goes:
        librdkafka's handle must not outlive it)."""
        queue, self._queue = self._queue, None
        if queue is not None:
            self._lib.rd_kafka_queue_io_event_enable(queue, -1, None, 0)
            self._lib.rd_kafka_queue_destroy(queue)
        self._receiver.close()
        self._sender.close()


def attach(producer: Any, client_id: str) -> QueueEvents | str:
    """Signal ``producer``'s delivery reports through a descriptor, or the reason it
    cannot be done safely with this confluent-kafka build (the caller then polls from a
    thread)."""
    try:
        import confluent_kafka

        version = confluent_kafka.version()[0]
        if version.split(".")[0] not in KNOWN_MAJORS:
            return f"confluent-kafka {version}: its Handle layout is not known"
        lib = _library()
        expected = confluent_kafka.libversion()[1]
        if lib.rd_kafka_version() != expected:
            return "the librdkafka found is not the one confluent-kafka loaded"
        rk = ctypes.c_void_p.from_address(id(producer) + object.__basicsize__).value
        if not rk:
            return "the producer has no librdkafka handle"
        name = (lib.rd_kafka_name(rk) or b"").decode(errors="replace")
        if not name.startswith(f"{client_id}#producer-") or lib.rd_kafka_type(rk) != _PRODUCER:
            return f"the handle found is not this producer's ({name!r})"
        return QueueEvents(lib, rk)
    except (OSError, AttributeError, ImportError, ValueError) as exc:
        return f"librdkafka's queue events are not reachable: {exc}"
