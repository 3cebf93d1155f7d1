"""Background reading of one channel: receive in batches, validate, buffer (bounded).

The buffer is bounded twice: in messages (``capacity``) and in payload bytes
(``byte_limit``). While either is reached the reader stops pulling from its consumer and
waits for room (an event set when messages are taken), so a channel read faster than it
is consumed holds at most ``byte_limit`` plus about one message.

Undecodable messages are counted, logged with channel and MessageID, handed to an
optional callback and skipped: one bad message never stops a stream. Good ones wait in
the buffer as rows (:mod:`msgstream.wire.rows`) and become message objects when taken.

A reader can be *bounded* (:meth:`ChannelReader.bound`): it reads up to and including a
stop MessageID and then ends, dropping what a receive brought from past the stop. That
is how a stream reads "what was there when it started" without scanning for it first.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from ..contract.backend import ConsumedBatch, ConsumedMessage, Consumer, MessageID
from ..errors import CodecError, UnknownMessageTypeError
from ..observability.logs import fields, get_logger
from ..observability.observe import UNDECODABLE, ConsumeProbe, type_label
from ..runtime.scope import cancel_and_wait
from ..wire.codec import COLUMN_WISE_FROM, MessageRegistry, decode_batch
from ..wire.messages import TsMsg
from ..wire.rows import RowQueue, Rows, decoded_rows

log = get_logger(__name__)

BadMessageHandler = Callable[[ConsumedMessage, CodecError], None]
_code = attrgetter("code")


def batch_reader(consumer: Consumer) -> Callable[[int], ConsumedBatch] | None:
    """``consumer``'s batch read (:class:`~msgstream.contract.backend.BatchConsumer`), unless it has
    none or its ``receive_nowait`` was replaced on the object itself (a wrapper for
    metrics, tracing or fault injection): the batch read would bypass that wrapper, so
    a reader then goes through ``receive_nowait``."""
    if "receive_nowait" in getattr(consumer, "__dict__", ()):
        return None
    found: Callable[[int], ConsumedBatch] | None = getattr(consumer, "receive_batch_nowait", None)
    return found


@dataclass(slots=True)
class ReadStats:
    received: int = 0
    decode_errors: int = 0
    unknown_types: int = 0


@dataclass(frozen=True, slots=True)
class ReaderSettings:
    """What the readers of one stream share, handed down by the stream that makes them."""

    registry: MessageRegistry
    """Decodes payloads."""
    capacity: int
    """Messages a reader buffers at most."""
    byte_limit: int
    """Payload bytes a reader buffers at most (plus about one message)."""
    max_message_bytes: int
    """A bigger payload is a bad message."""
    on_bad_message: BadMessageHandler | None
    """Told of each payload skipped as bad (else it is logged)."""
    arrived: asyncio.Event
    """Set when a reader buffers something: the stream's one wake-up."""
    stats: ReadStats
    """The stream's counters, shared by its readers."""
    backend: str
    """The backend's name, in the readers' log records."""
    unchecked: frozenset[int] = frozenset()
    """Insert/Delete type codes whose bodies are left unchecked (see
    :func:`~msgstream.wire.codec.decode_batch`)."""


FIRST_READ = 16
"""Messages a reader asks for in its first batch after the first message; each batch
after that may be twice as large, up to the buffer's capacity. A stream cuts its first
pack once every channel has shown a tick: on a backlog, with full-size first batches,
that waited for each channel's first 1,024 messages to be read and checked, with nothing
else running meanwhile. With this ramp the first pack comes an order of magnitude sooner,
and reading the whole backlog takes as long (docs/benchmarks/spark.md)."""


class ChannelReader:
    """Reads one consumer into a bounded :class:`~msgstream.wire.rows.RowQueue`.

    Uses the consumer's optional ``receive_batch_nowait`` (see
    :class:`~msgstream.contract.backend.BatchConsumer`) when it has one, else ``receive_nowait``.
    """

    def __init__(
        self, consumer: Consumer, settings: ReaderSettings, probe: ConsumeProbe | None = None
    ) -> None:
        self.consumer = consumer
        self.channel = consumer.channel
        self.buffer = RowQueue()
        self.error: BaseException | None = None
        self._registry = settings.registry
        self._capacity = settings.capacity
        self._byte_limit = settings.byte_limit
        self._arrived = settings.arrived
        self._space = asyncio.Event()
        self._stats = settings.stats
        self._max_bytes = settings.max_message_bytes
        self._on_bad = settings.on_bad_message
        self._unchecked = settings.unchecked
        self.probe = probe
        """Reports what this channel's reading does (None: nothing is reported)."""
        self._log_fields = fields(settings.backend, self.channel, consumer.subname)
        self._task: asyncio.Task[None] | None = None
        self._receive_batch: Callable[[int], ConsumedBatch] | None = None
        self._stop: _Stop | None = None
        self.reached_stop = False
        """A bounded reader read its channel up to its stop: nothing more is buffered."""

    def bound(self, stop: MessageID | None, parse: Callable[[bytes], MessageID]) -> None:
        """Read up to and including ``stop`` only (None: nothing, the channel was empty);
        ``parse`` reads a MessageID from a received message's bytes. Call it before the
        reader starts; a reader started at or before its stop then ends on receiving it
        (or anything past it)."""
        if self._task is not None:
            raise RuntimeError("bound() a reader before it starts")
        self._stop = _Stop(stop, parse)
        self.reached_stop = stop is None

    def resume_at(self, msg_id: MessageID, include_current: bool) -> None:
        """Reading moves to ``msg_id`` (a seek): a bounded reader that starts past its
        stop has reached it at once, one that starts before it has not yet."""
        stop = self._stop
        if stop is not None:
            self.reached_stop = stop.passed_by(msg_id, include_current)

    def start(self) -> None:
        """Start reading (again, after a stop or after the reading task failed); a
        bounded reader that reached its stop stays stopped."""
        if self.reached_stop:
            self._arrived.set()
            return
        if self._task is None or self._task.done():
            self._receive_batch = batch_reader(self.consumer)
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"msgstream-reader-{self.channel}"
            )

    def revive(self) -> None:
        """Restart reading if the task ended on an error that was already reported."""
        if self._task is not None and self._task.done() and self.error is None:
            if self.reached_stop:
                return
            self._task = None
            self.start()

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def clear(self) -> None:
        self.buffer.clear()
        self.error = None
        self._space.set()

    def popleft(self) -> TsMsg:
        """Take the oldest buffered message."""
        msg = self.buffer.popleft()
        self._made_room()
        return msg

    def take(self, limit: int) -> tuple[list[TsMsg], int, int]:
        """Take up to ``limit`` of the oldest buffered messages, with their least
        ``begin_ts`` and greatest ``end_ts`` (see :meth:`~msgstream.wire.rows.RowQueue.take`)."""
        taken = self.buffer.take(limit)
        self._made_room()
        return taken

    def advance(self, count: int) -> None:
        """Take ``count`` rows of the buffer's head chunk (their new owner keeps them)."""
        self.buffer.advance(count)
        self._made_room()

    def _made_room(self) -> None:
        buffer = self.buffer
        if len(buffer) < self._capacity and buffer.nbytes < self._byte_limit:
            self._space.set()

    @property
    def full(self) -> bool:
        """Whether the buffer is at its message or byte limit (the reader waits)."""
        buffer = self.buffer
        return len(buffer) >= self._capacity or buffer.nbytes >= self._byte_limit

    def _receive_nowait(self, room: int) -> ConsumedBatch:
        if self._receive_batch is not None:
            return self._receive_batch(room)
        return ConsumedBatch.of(self.channel, self.consumer.receive_nowait(room))

    def _rows(self, batch: ConsumedBatch) -> Rows:
        """Validate a batch: the good messages as rows, the bad ones reported."""
        decoded = decode_batch(
            batch.payloads, self._registry, self._max_bytes, self._unchecked, COLUMN_WISE_FROM
        )
        payloads, ids = batch.payloads, batch.id_bytes
        if decoded.bad:
            bad = {index for index, _ in decoded.bad}
            payloads = [p for i, p in enumerate(payloads) if i not in bad]
            ids = [b for i, b in enumerate(ids) if i not in bad]
            for index, exc in decoded.bad:
                self.report_bad(batch.message(index), exc)
        return decoded_rows(self.channel, self.consumer.subname, decoded, payloads, ids)

    def report_bad(self, raw: ConsumedMessage, exc: CodecError) -> None:
        """Count, log and hand on a message of this channel found bad, then skip it."""
        if isinstance(exc, UnknownMessageTypeError):
            self._stats.unknown_types += 1
        else:
            self._stats.decode_errors += 1
        if self.probe is not None:
            self.probe.bad(exc)
        log.warning(
            "skipping undecodable message on channel %r at MessageID %r: %s",
            raw.channel,
            raw.msg_id,
            exc,
            extra=self._log_fields,
        )
        if self._on_bad is not None:
            try:
                self._on_bad(raw, exc)
            except Exception:  # a failing callback must not cost the messages after it
                log.exception(
                    "on_bad_message callback failed on channel %r",
                    raw.channel,
                    extra=self._log_fields,
                )

    def _observe(self, probe: ConsumeProbe, batch: ConsumedBatch, rows: Rows) -> None:
        """Report a batch read: its messages counted by type (once per batch, from the
        plans its good rows were checked with; the rest did not decode) and its bytes."""
        types: dict[str, int] = {}
        for code, count in Counter(map(_code, rows.plans)).items():
            cls = self._registry.lookup(code)
            label = str(code) if cls is None else type_label(cls)
            types[label] = types.get(label, 0) + count
        bad = len(batch) - len(rows.plans)
        if bad:
            types[UNDECODABLE] = bad
        probe.received(len(batch), sum(map(len, batch.payloads)), types)
        if probe.wants_properties:
            for index, id_bytes in enumerate(batch.id_bytes):
                properties = batch.message(index).properties
                if properties:
                    probe.received_properties(id_bytes, properties)

    async def _run(self) -> None:
        consumer, buffer, capacity = self.consumer, self.buffer, self._capacity
        byte_limit = self._byte_limit
        # The largest payload read so far sizes the next batch so it fits the bytes left
        # (messages are not seen before they are read); 0 (none yet) asks for one.
        largest = 0
        # Reads start small and double (see FIRST_READ).
        ramp = FIRST_READ
        stop = self._stop
        try:
            while not self.reached_stop:
                room = capacity - len(buffer)
                byte_room = byte_limit - buffer.nbytes
                if room <= 0 or byte_room <= 0:
                    self._space.clear()
                    await self._space.wait()
                    continue
                room = min(room, byte_room // largest or 1, ramp) if largest else 1
                batch = self._receive_nowait(room)
                if not len(batch):
                    batch = ConsumedBatch.of(self.channel, [await consumer.receive()])
                if stop is not None:
                    batch, self.reached_stop = stop.cut(batch)
                if len(batch):
                    self._stats.received += len(batch)
                    rows = self._rows(batch)
                    if self.probe is not None:
                        self._observe(self.probe, batch, rows)
                    if largest:  # not the first message alone
                        ramp = min(ramp * 2, capacity)
                    largest = max(largest, max(map(len, batch.payloads)))
                    buffer.append(rows)
                self._arrived.set()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = exc
            self._arrived.set()


@dataclass(frozen=True, slots=True)
class _Stop:
    """Where a bounded reader ends: ``last``, the last MessageID it reads (None: none)."""

    last: MessageID | None
    parse: Callable[[bytes], MessageID]

    def passed_by(self, msg_id: MessageID, include_current: bool) -> bool:
        """Whether reading from ``msg_id`` (itself included or not) reads nothing up to
        the stop."""
        last = self.last
        return last is None or msg_id > last or (msg_id == last and not include_current)

    def cut(self, batch: ConsumedBatch) -> tuple[ConsumedBatch, bool]:
        """``batch`` up to the stop, and whether the stop is reached."""
        if self.last is None:
            return batch.first(0), True
        return batch.upto(self.last, self.parse)
