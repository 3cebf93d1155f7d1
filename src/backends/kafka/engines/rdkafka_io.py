"""librdkafka's queue IO events for confluent-kafka handles: the event loop itself waits
for what librdkafka hands over.

librdkafka can write a byte to a file descriptor whenever a queue goes from empty to
non-empty -- ``rd_kafka_queue_io_event_enable``, the API librdkafka offers for event
loops. With it the loop watches the descriptor and serves the queue without blocking:

- a ``Producer``'s main queue, where delivery reports arrive, served with ``poll(0)``: one
  wake-up from librdkafka's broker thread to the loop. Without it a thread must block in
  ``poll()`` and then wake the loop in turn: a second wake-up, a large share of an
  acknowledgement's time on a local broker (docs/benchmarks/code-notes.md);
- a ``Consumer``'s consumer queue, where fetched records arrive, served with
  ``consume(n, 0)``: no fetch thread blocked in ``poll()``, so a seek or a close never
  waits for one to come back.

confluent-kafka does not expose that call, so it is reached through :mod:`ctypes` (no
maintained package offers it either):

- the C library is the one confluent-kafka's extension is linked against: symbols are
  looked up through the extension's own handle, which searches what it loaded;
- the ``rd_kafka_t`` pointer is the first field after the object header of
  confluent-kafka's ``Handle`` struct (``rk``, in that place since confluent-kafka 0.9).

Both are checked before anything is enabled: the binding's major version must be one
whose layout is known (:data:`KNOWN_MAJORS`), the library found must report the version
confluent-kafka reports, and ``rd_kafka_name`` of the pointer must be the handle's own
name (``<client.id>#producer-<n>`` or ``#consumer-<n>``) with the matching type. On any
mismatch :func:`attach` returns the reason instead, and the engine keeps its thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import socket
from typing import Any

KNOWN_MAJORS = frozenset({"2"})
"""confluent-kafka major versions whose ``Handle`` struct starts with ``rk``."""

_TYPES = {"producer": 0, "consumer": 1}
"""``RD_KAFKA_PRODUCER`` and ``RD_KAFKA_CONSUMER``."""


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
    for getter in (lib.rd_kafka_queue_get_main, lib.rd_kafka_queue_get_consumer):
        getter.restype = ctypes.c_void_p
        getter.argtypes = [ctypes.c_void_p]
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
    """A handle's queue signalling through a socket pair: :attr:`fileno` becomes readable
    when something is waiting in it. Call :meth:`drained` before serving the queue
    (``poll(0)``, ``consume(n, 0)``: serving re-arms the signal), and :meth:`close`
    before the handle is flushed, closed or dropped."""

    def __init__(self, lib: Any, queue: int) -> None:
        self._lib = lib
        self._receiver, self._sender = socket.socketpair()
        self._receiver.setblocking(False)
        self._sender.setblocking(False)
        self._queue: int | None = queue
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


def attach(handle: Any, client_id: str, role: str = "producer") -> QueueEvents | str:
    """Signal the queue of ``handle`` -- a ``Producer``'s main queue (its delivery
    reports), or with ``role="consumer"`` a ``Consumer``'s consumer queue (its records)
    -- through a descriptor, or the reason it cannot be done safely with this
    confluent-kafka build (the caller then polls from a thread)."""
    try:
        import confluent_kafka

        version = confluent_kafka.version()[0]
        if version.split(".")[0] not in KNOWN_MAJORS:
            return f"confluent-kafka {version}: its Handle layout is not known"
        lib = _library()
        expected = confluent_kafka.libversion()[1]
        if lib.rd_kafka_version() != expected:
            return "the librdkafka found is not the one confluent-kafka loaded"
        rk = ctypes.c_void_p.from_address(id(handle) + object.__basicsize__).value
        if not rk:
            return f"the {role} has no librdkafka handle"
        name = (lib.rd_kafka_name(rk) or b"").decode(errors="replace")
        if not name.startswith(f"{client_id}#{role}-") or lib.rd_kafka_type(rk) != _TYPES[role]:
            return f"the handle found is not this {role}'s ({name!r})"
        getter = (
            lib.rd_kafka_queue_get_main if role == "producer" else lib.rd_kafka_queue_get_consumer
        )
        queue = getter(rk)
        if not queue:
            return f"the {role} has no such queue"
        return QueueEvents(lib, queue)
    except (OSError, AttributeError, ImportError, ValueError, KeyError) as exc:
        return f"librdkafka's queue events are not reachable: {exc}"
