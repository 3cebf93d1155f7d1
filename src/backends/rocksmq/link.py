"""An attached process's requests to the owner of a shared store (see :mod:`.server`).

A :class:`Link` is this process's way to the owner of one store; it keeps one
:class:`Connection` per event loop (a connection's transport belongs to its loop) and
connects lazily, on the first request. Every request has a deadline,
``msgstream.operation_timeout_s`` after it was made: one timer per connection fails the
oldest pending requests when it passes (requests are kept in the order they were made,
so the oldest is first), with :class:`BackendUnavailableError`, or with
:class:`SendOutcomeUnknownError` for a send. A hung owner therefore costs each caller one
timeout, never a hang, and the connection is kept: after the owner resumes, requests go
through again.

When the connection ends (the owner exited, was killed, or let go of the store), requests
not answered yet stay pending. The connection tries to take ownership itself (the
:class:`Link`'s ``take_over``: a non-blocking ``flock``, then opening the store), then to
connect to whoever owns the store now, again and again with a growing pause (2 ms to
100 ms), for as long as anything waits on it. Once connected it tells the new owner which
consumers this process has open, then sends every pending request again, in order.
That is safe because each request is idempotent: reads, seeks and acknowledgements say
where, not how far, and a send carries its producer's id and sequence number, so the new
owner answers a send that was already stored with the ids it got
(:meth:`RocksStore.append_once <.store.RocksStore.append_once>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, cast

from msgstream.errors import (
    BackendUnavailableError,
    MsgStreamError,
    SendOutcomeUnknownError,
    StreamClosedError,
)
from msgstream.observability.logs import fields, get_logger

from .errors import StoreError, StoreLockedError, StorePathError
from .frames import (
    FRAME_SLACK,
    MIN_FRAME_LIMIT,
    VERSION,
    FrameDecoder,
    FrameError,
    Op,
    check_error,
    check_reply,
    encode,
)
from .ownership import SocketAddress, peer_uid, read_owner, remember_for_fork
from .wire_errors import rebuild_error

log = get_logger(__name__)

BACKOFF_FIRST_S = 0.002
BACKOFF_MAX_S = 0.1
_HELLO = 0
"""The request number of the handshake (every other request counts up from 1)."""

Reply = tuple[list[Any], list[bytes]]


class Link:
    """This process's way to the owner of the store at ``path``."""

    def __init__(
        self,
        path: str,
        timeout_s: float,
        take_over: Callable[[], Awaitable[None]],
    ) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.take_over = take_over
        """Become the owner if nobody is (done in a worker thread); returns either way."""
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Connection] = (
            weakref.WeakKeyDictionary()
        )
        self.closed = False

    def connection(self) -> Connection:
        """The running event loop's connection to the owner."""
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None:
            if self.closed:
                raise StreamClosedError(f"rocksmq link to {self.path!r}")
            connection = self._connections[loop] = Connection(self, loop)
        return connection

    def close(self) -> None:
        self.closed = True
        for connection in list(self._connections.values()):
            connection.close()
        self._connections.clear()


class Answer(Protocol):
    """Where a request's reply goes: an :class:`asyncio.Future`, or an object that acts on
    it at once (a consumer's read: one turn of the event loop sooner)."""

    def done(self) -> bool: ...

    def set_result(self, result: Reply, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class _Pending:
    __slots__ = ("deadline", "frame", "future", "op", "quiet")

    def __init__(self, op: Op, frame: bytes, future: Answer, deadline: float) -> None:
        self.op = op
        self.frame = frame
        self.future = future
        self.deadline = deadline
        self.quiet = False
        """Nobody waits for the answer: a failure is only logged."""

    def fail(self, exc: BaseException) -> None:
        future = self.future
        if not future.done():
            future.set_exception(exc)
            if self.quiet and isinstance(future, asyncio.Future):
                future.exception()  # retrieved: nobody else will


class Connection:
    """A link's connection in one event loop (see the module doc)."""

    def __init__(self, link: Link, loop: asyncio.AbstractEventLoop) -> None:
        self.link = link
        self.loop = loop
        self.pending: dict[int, _Pending] = {}
        self.consumers: Counter[tuple[str, str]] = Counter()
        """This process's open consumers on this connection, re-announced to a new owner."""
        self.owner_pid = 0
        self.frame_limit = MIN_FRAME_LIMIT
        self._numbers = itertools.count(1)
        self._wire: _Wire | None = None
        self._ready = False
        self._connector: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._hello: asyncio.Future[Reply] | None = None
        self._closed = False

    # --- requests -----------------------------------------------------------------------
    def request(
        self,
        op: Op,
        control: Sequence[Any],
        blobs: Sequence[bytes] = (),
        *,
        quiet: bool = False,
        answer: Answer | None = None,
    ) -> Answer:
        """Send a request; ``answer`` (a new future by default, returned) gets the reply's
        ``(control, blobs)`` or the error (``quiet``: nobody waits for it, a failure is
        only logged)."""
        if self._closed:
            raise StreamClosedError(f"rocksmq link to {self.link.path!r}")
        number = next(self._numbers)
        frame = encode(op, number, control, blobs)
        if answer is None:
            answer = self.loop.create_future()
            if quiet:
                answer.add_done_callback(_log_failure)
        deadline = self.loop.time() + self.link.timeout_s
        entry = self.pending[number] = _Pending(op, frame, answer, deadline)
        entry.quiet = quiet
        if self._timer is None:
            self._arm()
        wire = self._wire
        if self._ready and wire is not None:
            wire.transport.write(frame)
        else:
            self._connect_soon()
        return answer

    async def call(self, op: Op, control: Sequence[Any], blobs: Sequence[bytes] = ()) -> Reply:
        future: asyncio.Future[Reply] = self.loop.create_future()
        self.request(op, control, blobs, answer=future)
        return await future

    def tell(self, op: Op, control: Sequence[Any]) -> None:
        """A request whose answer nobody waits for (its failure is only logged)."""
        if self._closed:
            return
        self.request(op, control, quiet=True)

    # --- deadlines ----------------------------------------------------------------------
    def _arm(self) -> None:
        if self.pending:
            first = next(iter(self.pending.values()))
            self._timer = self.loop.call_at(first.deadline, self._expire)
        else:
            self._timer = None

    def _expire(self) -> None:
        now = self.loop.time()
        pending = self.pending
        while pending:
            number, first = next(iter(pending.items()))
            if first.deadline > now:
                break
            del pending[number]
            first.fail(self._timeout_error(first.op))
        self._arm()

    def _timeout_error(self, op: Op) -> BackendUnavailableError:
        owner = read_owner(self.link.path)
        if self._ready:
            why = f"the owner (process {self.owner_pid}) did not answer"
        elif owner is not None and owner.sharing == "exclusive":
            return StoreLockedError(
                self.link.path,
                f"process {owner.pid} holds the store with rocksmq.sharing: exclusive; set "
                "rocksmq.sharing: auto in every process that shares it",
            )
        else:
            who = f"process {owner.pid}" if owner is not None else "its owner"
            why = f"could not reach {who} nor take the store over"
        timeout = f"{self.link.timeout_s:g} s (msgstream.operation_timeout_s)"
        text = f"{op.name.lower()}: {why} within {timeout}"
        if op is Op.APPEND:
            return SendOutcomeUnknownError(
                f"rocksmq store at {self.link.path!r}: a send was not acknowledged: {text}; "
                "it may have been stored"
            )
        return BackendUnavailableError(f"rocksmq store at {self.link.path!r}: {text}")

    def _fail_all(self, exc: BaseException) -> None:
        pending, self.pending = self.pending, {}
        for entry in pending.values():
            entry.fail(exc)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- replies ------------------------------------------------------------------------
    def received(self, wire: _Wire, nbytes: int) -> None:
        """``nbytes`` more were read into ``wire``'s decoder."""
        if wire is not self._wire:
            return
        try:
            frames = wire.decoder.buffer_updated(nbytes)
            for op, number, control, blobs in frames:
                if number == _HELLO:
                    self._answer(self._hello, Op.HELLO, op, control, blobs)
                    continue
                entry = self.pending.pop(number, None)
                if entry is not None:
                    try:
                        self._answer(entry.future, entry.op, op, control, blobs)
                    except FrameError as exc:
                        if not entry.future.done():
                            entry.future.set_exception(
                                BackendUnavailableError(
                                    f"rocksmq store at {self.link.path!r}: the owner's answer "
                                    f"to {entry.op.name.lower()} is malformed: {exc}"
                                )
                            )
                        raise
        except FrameError as exc:
            log.warning(
                "rocksmq store at %s: closing the connection to its owner (process %d): %s",
                self.link.path,
                self.owner_pid,
                exc,
                extra=fields("rocksmq"),
            )
            wire.transport.abort()

    @staticmethod
    def _answer(future: Answer | None, asked: Op, op: Op, control: Any, blobs: list[bytes]) -> None:
        if op is Op.ERROR:
            error = rebuild_error(*check_error(control))
            if future is not None and not future.done():
                future.set_exception(error)
            return
        if op is not Op.REPLY:
            raise FrameError(f"{op.name} is not a reply")
        check_reply(asked, control, blobs)
        if future is not None and not future.done():
            future.set_result((control, blobs))

    # --- connecting ---------------------------------------------------------------------
    def lost(self, wire: _Wire) -> None:
        if wire is not self._wire:
            return
        self._wire = None
        self._ready = False
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(ConnectionResetError("the owner closed the connection"))
        if self.pending or self.consumers:
            self._connect_soon()

    def _connect_soon(self) -> None:
        if self._connector is None and not self._closed:
            self._connector = self.loop.create_task(
                self._connect(), name=f"msgstream-rocksmq-connect {self.link.path}"
            )

    async def _connect(self) -> None:
        pause = BACKOFF_FIRST_S
        try:
            while self.pending or self.consumers:
                try:
                    await self.link.take_over()
                    if await self._connect_once():
                        return
                except StoreError as exc:  # locked for good, damaged...: waiting won't help
                    self._fail_all(exc)
                    return
                except OSError:
                    pass  # nobody listens yet (an owner is starting) or it just went
                except Exception:  # anything else: logged, and tried again
                    log.exception(
                        "rocksmq store at %s: connecting to its owner failed",
                        self.link.path,
                        extra=fields("rocksmq"),
                    )
                await asyncio.sleep(pause)
                pause = min(pause * 2, BACKOFF_MAX_S)
        finally:
            self._connector = None

    async def _connect_once(self) -> bool:
        with SocketAddress(self.link.path) as where:
            transport, wire = await self.loop.create_unix_connection(
                lambda: _Wire(self), where.address
            )
        sock = transport.get_extra_info("socket")
        uid = peer_uid(sock)
        if uid != os.getuid():
            transport.abort()
            raise StorePathError(
                self.link.path,
                f"its socket is served by uid {uid}, not by this process's user ({os.getuid()})",
            )
        self._wire = wire
        self._hello = hello = self.loop.create_future()
        transport.write(encode(Op.HELLO, _HELLO, [VERSION, os.getpid()]))
        try:
            async with asyncio.timeout(self.link.timeout_s):
                (_, owner_pid, frame_limit), _ = await hello
        except (TimeoutError, ConnectionError):
            if self._wire is wire:
                self._wire = None
            transport.abort()
            return False
        except MsgStreamError as exc:  # refused: e.g. another protocol version
            if self._wire is wire:
                self._wire = None
            transport.abort()
            self._fail_all(exc)
            return True
        finally:
            self._hello = None
        self.owner_pid = owner_pid
        self.frame_limit = frame_limit
        wire.decoder.limit = frame_limit + FRAME_SLACK
        self._ready = True
        for (channel, subname), count in self.consumers.items():
            self.tell(Op.CONSUMER_OPENED, [channel, subname, count])
        for entry in list(self.pending.values()):
            transport.write(entry.frame)
        return True

    def close(self) -> None:
        self._closed = True
        if self._connector is not None:
            self._connector.cancel()
            self._connector = None
        wire, self._wire = self._wire, None
        self._ready = False
        if wire is not None:
            wire.transport.close()
        self._fail_all(StreamClosedError(f"rocksmq link to {self.link.path!r}"))


class _Wire(asyncio.BufferedProtocol):
    """One socket connection of a :class:`Connection` (a new one after each reconnect);
    replies are read straight into its decoder's buffer."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.decoder = FrameDecoder(MIN_FRAME_LIMIT + FRAME_SLACK)
        self.transport: asyncio.Transport
        self._fd: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._fd = transport.get_extra_info("socket").fileno()
        remember_for_fork(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.connection.received(self, nbytes)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fd = None
        self.connection.lost(self)

    def forget_in_child(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _log_failure(future: asyncio.Future[Reply]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.debug("rocksmq: a request nobody waited for failed: %s", future.exception())
