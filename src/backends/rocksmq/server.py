"""The owner's side of a shared store: other processes' requests, served from a thread.

The owner of a store (see :mod:`.ownership`) serves its socket from a thread of its own
with its own event loop, so a busy or blocked event loop in the owner's application
never stalls the other processes. Each request runs the same store functions the owner's
own clients run (:mod:`..log_client.ops`); RocksDB and :class:`~.store.RocksStore` are
safe to call from both threads.

Reads wait in the owner: a ``READ`` that finds nothing new is *parked* until an append to
its channel (made by any process, the owner included) or until its ``wait_ms``, then
answered with the new records: a consumer in another process gets a message one socket
hop after it was stored, without polling. Appends made by the owner's own producers reach
this thread through :attr:`LogStore.watcher <..log_client.store.LogStore.watcher>`, set
only while some read waits (else the owner's sends pay nothing for it); appends served
here wake the owner's own consumers with
:meth:`~..log_client.store.LogStore.notify_threadsafe`, and answer the reads waiting for
exactly what they stored from the request itself, without reading it back.

Each connection is bounded: a frame over the limit, a malformed one or one from another
user closes it (logged with the reason); while a client does not read its replies (the
socket's buffer is full) its requests are not read either; parked reads per connection
are capped. The owner and its other clients carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import threading
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable
from itertools import accumulate, repeat
from operator import add
from typing import Any, cast

import orjson

from msgstream.contract.channels import validate_channel_name, validate_subscription_name
from msgstream.errors import MsgStreamError, StreamStateError, TopicNotFoundError
from msgstream.observability.logs import fields, get_logger
from msgstream.wire.position import SubscriptionPosition

from ..log_client import ops
from ..log_client.client import RocksmqMessageID
from .frames import (
    VERSION,
    Frame,
    FrameDecoder,
    FrameError,
    Op,
    check_error,
    check_request,
    encode,
)
from .ownership import bind_listener, peer_uid, remember_for_fork
from .store import RocksStore
from .wire_errors import error_fields

log = get_logger(__name__)

READ_LIMIT = 65536
"""Most records one read may ask for."""
READ_MAX_BYTES = 16 * 1024 * 1024
"""Most payload bytes one read reply holds (at least one record, whatever its size)."""
REPLY_BUFFER_BYTES = 8 * 1024 * 1024
"""Replies a connection may have waiting to be sent before the owner stops reading its
requests (plus the reply that crossed it: at most :data:`READ_MAX_BYTES`)."""
SOCKET_SEND_BYTES = 4 * 1024 * 1024
"""The send buffer the owner asks of the kernel per connection (capped at
``net.core.wmem_max``): a client busy with what it read takes one socket read per turn of
its event loop, and the kernel's default (about 200 KiB) held large read replies back
for many turns."""
MAX_WAIT_MS = 60_000
PARKED_PER_CONNECTION = 4096
PRODUCER_EXPIRY_EVERY_S = 600.0
_POSITIONS = {p.value: p for p in SubscriptionPosition}

Reply = tuple[list[Any], list[bytes]]


def serving_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for the serving thread: uvloop's where it is installed (a
    dependency on Linux and macOS; its transports cost a fraction of asyncio's per
    request), else asyncio's. The loop is the owner's own: the application's loop is
    whatever the application chose."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class OwnerServer:
    """Serves the store at its socket (see the module doc); :meth:`start`, :meth:`stop`."""

    def __init__(self, store: RocksStore, frame_limit: int) -> None:
        self.store = store
        self.frame_limit = frame_limit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._connections: set[_Connection] = set()
        self._parked: dict[str, dict[tuple[_Connection, int], _Parked]] = {}
        self._woken: deque[str] = deque()
        self._wake_scheduled = False
        self._listener_fd: int | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._valid: set[str] = set()
        """Channel names already found valid (checking one runs a regular expression)."""
        self._handlers: dict[Op, Callable[[_Connection, list[Any], Frame], Reply | None]] = {
            Op.HELLO: self._hello,
            Op.ENSURE_CHANNEL: self._ensure_channel,
            Op.HAS_CHANNEL: self._has_channel,
            Op.LIST_CHANNELS: self._list_channels,
            Op.DELETE_CHANNEL: self._delete_channel,
            Op.APPEND: self._append,
            Op.READ: self._read,
            Op.CANCEL_READ: self._cancel_read,
            Op.SUBSCRIBE: self._subscribe,
            Op.CONSUMER_OPENED: self._consumer_opened,
            Op.CONSUMER_CLOSED: self._consumer_closed,
            Op.SEEK: self._seek,
            Op.ACK: self._ack,
            Op.LATEST: self._latest,
            Op.RETAINED: self._retained,
            Op.PEEK: self._peek,
            Op.LIST_SUBSCRIPTIONS: self._list_subscriptions,
            Op.DELETE_SUBSCRIPTION: self._delete_subscription,
        }

    # --- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Bind the socket (errors raise here) and serve it from a new thread."""
        listener = bind_listener(self.store.path)
        self._listener_fd = listener.fileno()
        remember_for_fork(self)
        self._thread = threading.Thread(
            target=self._run, args=(listener,), name="msgstream-rocksmq-owner", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        """Stop listening, close every connection (the clients see EOF), and wait."""
        self.store.watcher = None
        loop, thread = self._loop, self._thread
        if loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._stopping.set)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def forget_in_child(self) -> None:
        """After a fork: the child must not keep the listening socket open."""
        fd, self._listener_fd = self._listener_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        for connection in list(self._connections):
            connection.forget_in_child()

    def _run(self, listener: Any) -> None:
        try:
            with asyncio.Runner(loop_factory=serving_loop) as runner:
                runner.run(self._serve(listener))
        except BaseException as exc:
            self._failure = exc
            log.exception("rocksmq owner: serving %s failed", self.store.path)
        finally:
            self._ready.set()

    async def _serve(self, listener: Any) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopping = asyncio.Event()
        # The socket file is this module's to replace and remove (ownership.bind_listener,
        # remove_socket). Python 3.13's server, and uvloop's under 3.13, would also look the
        # bound name up (the temporary name, renamed since, or a /proc/self/fd path closed
        # since) to remove it at close: an error, or someone else's file. uvloop takes the
        # argument under every Python; asyncio's only from 3.13.
        on_uvloop = not isinstance(loop, asyncio.BaseEventLoop)
        keeps_file = on_uvloop or sys.version_info >= (3, 13)
        own_file: dict[str, Any] = {"cleanup_socket": False} if keeps_file else {}
        server = await loop.create_unix_server(lambda: _Connection(self), sock=listener, **own_file)
        self._expiry = loop.call_later(PRODUCER_EXPIRY_EVERY_S, self._expire_producers)
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            if self._expiry is not None:
                self._expiry.cancel()
            self._listener_fd = None
            server.close()
            for connection in list(self._connections):
                connection.close()
            await server.wait_closed()

    def _expire_producers(self) -> None:
        """Every :data:`PRODUCER_EXPIRY_EVERY_S`, in a worker thread: drop the last-send
        records of producers idle for an hour (see :meth:`RocksStore.expire_producers`)."""
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, self._expire_producers_now)
        self._expiry = loop.call_later(PRODUCER_EXPIRY_EVERY_S, self._expire_producers)

    def _expire_producers_now(self) -> None:
        try:
            self.store.expire_producers()
        except Exception:  # retried next round
            log.exception("rocksmq owner: dropping idle producers failed", extra=fields("rocksmq"))

    # --- wake-ups -----------------------------------------------------------------------
    def _watch(self, channel: str) -> None:
        """An append in another thread of this process (its own producers): wake the
        reads parked on ``channel``, batching wake-ups that come faster than served."""
        if channel in self._parked:
            self._woken.append(channel)
            if not self._wake_scheduled:
                self._wake_scheduled = True
                loop = self._loop
                if loop is not None:
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(self._drain_woken)

    def _drain_woken(self) -> None:
        self._wake_scheduled = False
        channels = set()
        woken = self._woken
        while woken:
            channels.add(woken.popleft())
        for channel in channels:
            self._appended(channel)

    def _appended(self, channel: str, fresh: _Fresh | None = None) -> None:
        """Answer the reads parked on ``channel`` that can now read something. ``fresh``
        is what an append served here just stored: a read waiting for exactly those ids
        is answered from it, without reading it back from RocksDB."""
        parked = self._parked.get(channel)
        if not parked:
            return
        for key, read in list(parked.items()):
            if read.connection.paused:
                continue  # answered when its client reads again (see _Connection)
            if fresh is not None and read.args[1] == fresh.first_id:
                # The reply first: the reader is waiting; the bookkeeping is not.
                read.connection.send_reply(read.request, fresh.reply(*read.args[2:]))
                self._unpark(key, read)
            else:
                self._try_parked(key, read)

    def _try_parked(self, key: tuple[_Connection, int], read: _Parked) -> None:
        try:
            reply = self._read_records(*read.args)
        except Exception as exc:
            self._unpark(key, read)
            read.connection.send_error(read.request, exc)
            return
        if reply is not None:
            self._unpark(key, read)
            read.connection.send_reply(read.request, reply)

    def _park(self, read: _Parked) -> None:
        """Park ``read``; the caller then checks its channel once more (an append made
        before the watcher was set would otherwise go unseen)."""
        channel = read.args[0]
        if not self._parked:  # the owner's own appends: heard only while reads wait
            self.store.watcher = self._watch
        parked = self._parked.setdefault(channel, {})
        key = (read.connection, read.handle)
        old = parked.pop(key, None)
        if old is not None:  # the reader moved on (a seek): its old read gets nothing
            old.timer.cancel()
            self._answer_empty(old)
        parked[key] = read
        read.connection.parked[read.handle] = read

    def _unpark(self, key: tuple[_Connection, int], read: _Parked) -> None:
        read.timer.cancel()
        channel = read.args[0]
        parked = self._parked.get(channel)
        if parked is not None and parked.get(key) is read:
            del parked[key]
            if not parked:
                del self._parked[channel]
                if not self._parked:
                    self.store.watcher = None  # nothing to wake: appends cost no call
        if read.connection.parked.get(read.handle) is read:
            del read.connection.parked[read.handle]

    def _expire_parked(self, read: _Parked) -> None:
        """Nothing came within the read's wait: answer it empty (the client asks again)."""
        self._unpark((read.connection, read.handle), read)
        self._answer_empty(read)

    def _answer_empty(self, read: _Parked) -> None:
        channel, from_id = read.args[0], read.args[1]
        try:
            next_read = max(from_id, self.store.first_readable(channel))
        except Exception as exc:
            read.connection.send_error(read.request, exc)
            return
        read.connection.send_reply(read.request, ([next_read, False], [b""]))

    def cancel_reads(self, connection: _Connection, handle: int | None = None) -> None:
        """Stop the parked reads of ``connection`` (of ``handle`` only, if given),
        answering them empty while the connection is open."""
        for key_handle, read in list(connection.parked.items()):
            if handle is None or key_handle == handle:
                self._unpark((connection, key_handle), read)
                if handle is not None:
                    self._answer_empty(read)

    def resumed(self, connection: _Connection) -> None:
        """A client reads its replies again: answer its parked reads that can be."""
        for handle, read in list(connection.parked.items()):
            if connection.paused:
                return
            self._try_parked((connection, handle), read)

    # --- requests -----------------------------------------------------------------------
    def _channel(self, name: Any) -> str:
        """``name`` if it is a valid channel name (InvalidChannelNameError otherwise)."""
        if name in self._valid:
            return str(name)
        validate_channel_name(name)
        if len(self._valid) >= 65536:
            self._valid.clear()
        self._valid.add(name)
        return str(name)

    def handle(self, connection: _Connection, frame: Frame) -> None:
        """Run one request and answer it (now, or later for a parked read or a write that
        must fsync). A control that is not the declared array raises FrameError."""
        op, request, control, blobs = frame
        handler = self._handlers.get(op)
        if handler is None:
            raise FrameError(f"{op.name} is not a request")
        check_request(op, control, blobs)
        try:
            reply = handler(connection, control, frame)
        except FrameError:
            raise
        except Exception as exc:
            connection.send_error(request, exc)
            return
        if reply is not None:
            connection.send_reply(request, reply)

    def _hello(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        version, pid = control
        conn.peer_pid = pid
        if version != VERSION:
            raise StreamStateError(
                f"rocksmq owner (pid {os.getpid()}) speaks protocol version {VERSION}, "
                f"this process {version}: run the same msgstream version in every process "
                "sharing the store"
            )
        return [VERSION, os.getpid(), self.frame_limit], []

    def _ensure_channel(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        self.store.ensure_channel(self._channel(control[0]))
        return [], []

    def _has_channel(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        return [self.store.has_channel(self._channel(control[0]))], []

    def _list_channels(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        return [self.store.list_channels()], []

    def _delete_channel(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel = self._channel(control[0])
        self.store.delete_channel(channel)
        self._stored(channel)
        return [], []

    def _stored(self, channel: str, fresh: _Fresh | None = None) -> None:
        """Something changed on ``channel``: wake its readers in every process (those
        of other processes first: their wake-up is the longer way)."""
        self._appended(channel, fresh)
        self.store.notify_threadsafe(channel)

    def _append(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply | None:
        channel, producer, seq, sync, properties = control
        self._channel(channel)
        if properties and not all(type(k) is str and type(v) is str for k, v in properties.items()):
            raise FrameError("APPEND frame: properties must map strings to strings")
        store = self.store
        args = (channel, frame.blobs, properties or {}, producer, seq, bool(sync))
        if not (sync or store.options.sync):
            ids = store.append_once(*args)
            if not ids:
                return [store.next_id(channel)], []
            if channel in self._parked:  # readers waiting: hand them what was just stored
                self._stored(channel, _Fresh(ids[0], frame.blobs, properties))
            else:
                self.store.notify_threadsafe(channel)
            return [ids[0]], []

        async def durably() -> None:  # an fsync takes milliseconds: not on this loop
            loop = asyncio.get_running_loop()
            try:
                ids = await loop.run_in_executor(None, store.append_once, *args)
            except Exception as exc:
                conn.send_error(frame.request, exc)
                return
            self._stored(channel)
            conn.send_reply(frame.request, ([ids[0] if ids else store.next_id(channel)], []))

        conn.tasks.add(task := asyncio.get_running_loop().create_task(durably()))
        task.add_done_callback(conn.tasks.discard)
        return None

    def _read(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply | None:
        handle, channel, from_id, limit, max_bytes, wait_ms = control
        self._channel(channel)
        limit, max_bytes = min(max(limit, 1), READ_LIMIT), min(max(max_bytes, 1), READ_MAX_BYTES)
        args = (channel, from_id, limit, max_bytes)
        reply = self._read_records(*args)
        if reply is not None or wait_ms <= 0:
            if reply is None:
                return [max(from_id, self.store.first_readable(channel)), False], [b""]
            return reply
        if len(conn.parked) >= PARKED_PER_CONNECTION and handle not in conn.parked:
            raise StreamStateError(
                f"a process may wait on at most {PARKED_PER_CONNECTION} reads at once"
            )
        loop = asyncio.get_running_loop()
        read = _Parked(conn, frame.request, handle, args)
        read.timer = loop.call_later(min(wait_ms, MAX_WAIT_MS) / 1000, self._expire_parked, read)
        self._park(read)
        # An append between the read above and parking is seen here, not lost.
        if self.store.next_id(channel) > from_id:
            self._try_parked((conn, handle), read)
        return None

    def _read_records(self, channel: str, from_id: int, limit: int, max_bytes: int) -> Reply | None:
        """The records of ``channel`` from ``from_id`` on, as a READ reply (None: none)."""
        store = self.store
        if not store.has_channel(channel):
            raise TopicNotFoundError(channel, store.backend_name, store.list_channels())
        stored = store.read_batch(channel, from_id, limit)
        if stored is None:
            return None
        props = None
        if stored.properties is not None:
            props = [orjson.dumps(dict(p)) if p else b"" for p in stored.properties]
        return read_reply(stored.ids, stored.payloads, props, stored.next_id, max_bytes)

    def _cancel_read(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        self.cancel_reads(conn, control[0])
        return [], []

    def _subscribe(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel, subname, position = control
        self._channel(channel)
        validate_subscription_name(subname)
        where = _POSITIONS.get(position)
        if where is None:
            raise FrameError(f"SUBSCRIBE frame: no position {position!r:.40}")
        start = ops.open_subscription(self.store, channel, subname, where)
        conn.consumers[(channel, subname)] += 1
        return [start], []

    def _consumer_opened(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel, subname, count = control
        self._channel(channel)
        validate_subscription_name(subname)
        for _i in range(min(max(count, 0), 1 << 16)):
            self.store.consumer_opened(channel, subname)
            conn.consumers[(channel, subname)] += 1
        return [], []

    def _consumer_closed(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        handle, channel, subname = control
        self.cancel_reads(conn, handle)
        key = (channel, subname)
        if conn.consumers[key] > 0:
            conn.consumers[key] -= 1
            self.store.consumer_closed(channel, subname)
        if conn.consumers[key] <= 0:
            del conn.consumers[key]
        self.store.notify_threadsafe(channel)
        return [], []

    def _seek(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel, subname, msg_id, inclusive = control
        self._channel(channel)
        validate_subscription_name(subname)
        return [ops.seek_target(self.store, channel, subname, msg_id, inclusive)], []

    def _ack(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel, subname, resume_at = control
        self._channel(channel)
        validate_subscription_name(subname)
        self.store.advance_subscription(channel, subname, resume_at)
        return [], []

    def _latest(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        return [ops.latest_id(self.store, self._channel(control[0]))], []

    def _retained(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        found = ops.retained(self.store, self._channel(control[0]))
        return ([None, 0] if found is None else list(found)), []

    def _peek(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel, msg_id = control
        payload = ops.peek(self.store, self._channel(channel), msg_id)
        return ([False], []) if payload is None else ([True], [payload])

    def _list_subscriptions(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        end, subs = ops.subscriptions(self.store, self._channel(control[0]))
        return [end, [[s.name, s.next_id, s.last_active_ms] for s in subs]], []

    def _delete_subscription(self, conn: _Connection, control: list[Any], frame: Frame) -> Reply:
        channel, subname = control
        self.store.delete_subscription(self._channel(channel), subname)
        return [], []

    def connection_closed(self, connection: _Connection) -> None:
        """A client went away: its reads stop waiting, its consumers count as closed."""
        self._connections.discard(connection)
        self.cancel_reads(connection)
        for (channel, subname), count in connection.consumers.items():
            for _i in range(count):
                with contextlib.suppress(MsgStreamError):
                    self.store.consumer_closed(channel, subname)
        connection.consumers.clear()
        for task in list(connection.tasks):
            task.cancel()


def read_reply(
    ids: list[bytes],
    payloads: list[bytes],
    props: list[bytes] | None,
    next_read: int,
    max_bytes: int,
) -> Reply:
    """A READ reply of these records (ids as 8 big-endian bytes, properties as JSON),
    cut after the record that reaches ``max_bytes`` (one record at least)."""
    if len(ids) == 1 and props is None:  # one record: nothing to cut (a hand-off)
        return [next_read, False], [RocksmqMessageID.tag + ids[0], payloads[0]]
    sizes = map(len, payloads)
    if props is not None:
        sizes = map(int.__add__, map(len, payloads), map(len, props))
    totals = list(accumulate(sizes))
    if totals[-1] > max_bytes:
        keep = max(bisect_right(totals, max_bytes), 1)
        if keep < len(ids):
            next_read = int.from_bytes(ids[keep], "big", signed=True)
            ids, payloads = ids[:keep], payloads[:keep]
            props = None if props is None else props[:keep]
    blobs = [b"".join(map(add, repeat(RocksmqMessageID.tag), ids)), *payloads]
    if props is not None:
        blobs.extend(props)
    return [next_read, props is not None], blobs


class _Fresh:
    """What an append served by the owner just stored (ids ``first_id`` on)."""

    __slots__ = ("first_id", "payloads", "properties")

    def __init__(
        self, first_id: int, payloads: list[bytes], properties: dict[str, str] | None
    ) -> None:
        self.first_id = first_id
        self.payloads = payloads
        self.properties = properties

    def reply(self, limit: int, max_bytes: int) -> Reply:
        first = self.first_id
        payloads = self.payloads[:limit]
        ids = [i.to_bytes(8, "big", signed=True) for i in range(first, first + len(payloads))]
        props = None
        if self.properties:
            props = [orjson.dumps(self.properties)] * len(payloads)
        return read_reply(ids, payloads, props, first + len(payloads), max_bytes)


class _Parked:
    """A read waiting for its channel to grow."""

    __slots__ = ("args", "connection", "handle", "request", "timer")

    def __init__(
        self, connection: _Connection, request: int, handle: int, args: tuple[str, int, int, int]
    ) -> None:
        self.connection = connection
        self.request = request
        self.handle = handle
        self.args = args
        """``(channel, from_id, limit, max_bytes)``"""
        self.timer: asyncio.TimerHandle


class _Connection(asyncio.BufferedProtocol):
    """One attached process's connection to the owner; requests are read straight into
    its decoder's buffer."""

    def __init__(self, server: OwnerServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.frame_limit)
        self.transport: asyncio.Transport | None = None
        self.peer_pid = 0
        self.paused = False
        self.consumers: Counter[tuple[str, str]] = Counter()
        self.parked: dict[int, _Parked] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._unhandled: deque[Frame] = deque()
        self._fd: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: a cast, not a check.
        self.transport = transport = cast(asyncio.Transport, transport)
        # Replies may queue up to this much while the client is busy (a 64 KiB limit let
        # one read reply stall every other consumer of the connection).
        transport.set_write_buffer_limits(high=REPLY_BUFFER_BYTES, low=REPLY_BUFFER_BYTES // 4)
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BYTES)
        self._fd = sock.fileno()
        uid = peer_uid(sock)
        if uid != os.getuid():
            log.warning(
                "rocksmq owner of %s: refused a connection from uid %d (only uid %d may attach)",
                self.server.store.path,
                uid,
                os.getuid(),
                extra=fields("rocksmq"),
            )
            transport.abort()
            return
        self.server._connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except FrameError as exc:
            self._refuse(exc)
            return
        if len(frames) == 1 and not self._unhandled and not self.paused:
            try:  # the usual read: one request, nothing waiting before it
                self.server.handle(self, frames[0])
            except FrameError as exc:
                self._refuse(exc)
            return
        self._unhandled.extend(frames)
        self._work()

    def _work(self) -> None:
        """Handle decoded requests, but none while the client is not reading replies."""
        unhandled = self._unhandled
        while unhandled and not self.paused and self.transport is not None:
            try:
                self.server.handle(self, unhandled.popleft())
            except FrameError as exc:
                self._refuse(exc)
                return

    def _refuse(self, exc: FrameError) -> None:
        log.warning(
            "rocksmq owner of %s: closing the connection of process %s: %s",
            self.server.store.path,
            self.peer_pid or "(unknown pid)",
            exc,
            extra=fields("rocksmq"),
        )
        self._unhandled.clear()
        if self.transport is not None:
            self.transport.abort()

    def pause_writing(self) -> None:
        self.paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
        self._work()
        self.server.resumed(self)

    def send_reply(self, request: int, reply: Reply) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(encode(Op.REPLY, request, *reply))

    def send_error(self, request: int, exc: BaseException) -> None:
        if not isinstance(exc, MsgStreamError):
            log.exception(
                "rocksmq owner of %s: a request of process %s failed",
                self.server.store.path,
                self.peer_pid,
                exc_info=exc,
                extra=fields("rocksmq"),
            )
        control = error_fields(exc)
        check_error(control)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode(Op.ERROR, request, control))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._unhandled.clear()
        self.server.connection_closed(self)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def forget_in_child(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
