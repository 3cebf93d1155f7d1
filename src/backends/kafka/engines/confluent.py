"""The confluent engine (``kafka.client: confluent``): confluent-kafka's ``Producer`` and
``Consumer`` (librdkafka) driven from asyncio without blocking the loop or polling it.

Sending. ``Producer.produce`` only queues a record (librdkafka's own threads batch and
send it), so it is called on the loop. Delivery reports are served in *windows*: every
report one ``Producer.poll`` serves (typically every record of a produce response) is
settled with one loop wake-up, not one per record. A pack's records share one future,
resolved when its last report arrives. Who waits for reports:

- the loop itself (:class:`_LoopDeliveries`): librdkafka writes to a socket the loop
  watches when reports arrive (:mod:`.rdkafka_io`), and the loop serves them with
  ``poll(0)``: one wake-up per window, as fast as a thread blocking in ``poll``;
- else a *delivery thread* (:class:`_DeliveryThread`) blocks in ``Producer.poll`` and hands
  each window to the loop with one ``call_soon_threadsafe``: a second wake-up per window.
  Used where the first cannot be set up (an unknown confluent-kafka build, a loop without
  ``add_reader``), and logged once at INFO.

Reading. One *fetch thread* per consumer runs ``Consumer.poll`` (which returns at the
first record) then ``Consumer.consume`` for what is already there: many records per
wake-up, handed to the loop as columns. When a fetch comes back full, the next one
starts at once in the background (read ahead by one fetch); otherwise none runs until
the consumer asks. A cancelled receive leaves its fetch running: its records are kept
for the next call. Repositioning waits for a running fetch and drops what it returns.

Blocking calls (offsets, commits, close) run in worker threads with librdkafka's own
timeout set to ``msgstream.operation_timeout_s``, inside the backend's deadline.

librdkafka's error codes become aiokafka's exception classes (:func:`library_error`), so
the backend keeps one table of failures for both engines.

Why not ``confluent_kafka.aio``: its ``AIOProducer`` runs each call through a thread
pool and resolves a future per record from the pool, buffers records in Python before
handing them to librdkafka, and refuses headers in its batch mode (msgstream's
properties are headers); ``AIOConsumer`` is the same thread-pool call per ``poll``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from aiokafka import errors as kafka_errors
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from msgstream.configuration.config_keys import secrets_of
from msgstream.errors import ConfigError

from ...broker_errors import BrokerCalls
from ..deadlines import PendingSend
from ..settings import KafkaConfig, librdkafka_consumer, librdkafka_producer, librdkafka_refusal
from . import COORDINATOR_MOVING, Engine, Fetched, Headers, ProducerBase
from .rdkafka_io import QueueEvents, attach

log = logging.getLogger(__name__)

POLL_S = 0.2
"""How long a delivery or fetch thread blocks in librdkafka per call when nothing happens
(it returns at once when something does): the bound on closing and repositioning."""

FETCH_WAIT_S = 1.0
"""How long a fetch served on the loop waits for a record before returning none."""

TAKE_BATCH = 1024
"""Records taken at most per look into the queue before a fetch has said how many."""

RETRY_S = 0.1
"""Pause before retrying a blocking call that failed with a retriable error."""

_TIMEOUTS = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT_QUEUE}
)
_UNREACHABLE = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._DESTROY}
)
_AUTHENTICATION = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL})


def library_error(error: KafkaError, about: str = "") -> kafka_errors.KafkaError:
    """librdkafka's ``error`` as the aiokafka exception the backend's table knows;
    ``about`` (such as the consumer group) is added to its message."""
    code = error.code()
    text = f"{error.name()}: {error.str()}{f' ({about})' if about else ''}"
    if code > 0:  # a broker error code: the same numbers in both libraries
        found: kafka_errors.KafkaError = kafka_errors.for_code(code)(text)
        return found
    if code in _TIMEOUTS:
        return kafka_errors.KafkaTimeoutError(text)
    if code in _UNREACHABLE:
        return kafka_errors.KafkaConnectionError(text)
    if code in _AUTHENTICATION:
        return kafka_errors.AuthenticationFailedError(text)
    return kafka_errors.KafkaError(text)


def _worth_retrying(error: KafkaError) -> bool:
    """librdkafka calls it retriable, or the group's coordinator is moving (which it
    reports as a plain failure of the call: asked again, as the aiokafka engine does)."""
    return bool(error.retriable()) or isinstance(library_error(error), COORDINATOR_MOVING)


def raised(exc: KafkaException, about: str = "") -> kafka_errors.KafkaError:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return library_error(error, about)
    return kafka_errors.KafkaError(str(exc))


def _construct(cls: Any, conf: dict[str, Any], section: KafkaConfig) -> Any:
    """``cls(conf)``; a refusal is a ConfigError showing none of ``section``'s secrets, and
    not chained to librdkafka's exception, which holds them as it said them."""
    try:
        return cls(conf)
    except (KafkaException, TypeError, ValueError) as exc:
        detail = librdkafka_refusal(exc, secrets_of(section))
    raise ConfigError("kafka.confluent", f"rejected by librdkafka: {detail}")


# -- sending ---------------------------------------------------------------------------


class _Records:
    """The records of one send (one, or a pack): one future for all, resolved on the loop
    with their offsets when the last is reported."""

    __slots__ = ("error", "future", "offsets", "pump", "remaining")

    def __init__(self, future: asyncio.Future[list[int]], pump: _Deliveries, count: int):
        self.future = future
        self.pump = pump
        self.remaining = count
        self.offsets: list[int] = []
        self.error: KafkaError | None = None

    def deliver(self, error: KafkaError | None, msg: Any) -> None:
        """A delivery report (in whichever thread serves them): reports of one partition
        arrive in the order the records were produced."""
        if error is None:
            self.offsets.append(msg.offset())
        elif self.error is None:
            self.error = error
        self.remaining -= 1
        if not self.remaining:
            self.pump.window.append(self)

    def settle(self) -> None:
        future = self.future
        if not future.done():
            if self.error is None:
                future.set_result(self.offsets)
            else:
                future.set_exception(library_error(self.error))


def _settle(window: list[Any]) -> None:
    for done in window:
        done.settle()


class _Deliveries(Protocol):
    """Who serves a producer's delivery reports, settling finished sends on the loop."""

    window: list[Any]
    """Sends finished by the reports being served (touched by the serving thread only)."""

    async def stop(self) -> None:
        """Serve no more reports; what the last poll finished stays in :attr:`window`."""
        ...


class _LoopDeliveries:
    """Reports served on the loop when librdkafka signals them (see :mod:`.rdkafka_io`)."""

    def __init__(
        self,
        producer: Any,
        loop: asyncio.AbstractEventLoop,
        settle: Callable[[list[Any]], None],
        events: QueueEvents,
    ) -> None:
        self.producer = producer
        self.loop = loop
        self.settle = settle
        self.events = events
        self.window: list[Any] = []

    def start(self) -> None:
        self.loop.add_reader(self.events.fileno(), self.serve)

    def serve(self) -> None:
        self.events.drained()  # first: a signal sent while poll() runs stays for next time
        self.producer.poll(0)
        window = self.window
        if window:
            self.window = []
            self.settle(window)

    async def stop(self) -> None:
        self.loop.remove_reader(self.events.fileno())
        self.events.close()


class _DeliveryThread(threading.Thread):
    """Blocks in ``Producer.poll``; hands each poll's finished sends to the loop at once."""

    def __init__(
        self,
        producer: Any,
        loop: asyncio.AbstractEventLoop,
        settle: Callable[[list[Any]], None],
    ) -> None:
        super().__init__(name="msgstream-kafka-deliveries", daemon=True)
        self.producer = producer
        self.loop = loop
        self.settle = settle
        self.window: list[Any] = []
        self.stopping = False

    def run(self) -> None:
        poll = self.producer.poll
        while not self.stopping:
            poll(POLL_S)
            self.hand_over()

    def hand_over(self) -> None:
        window = self.window
        if window:
            self.window = []
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                self.loop.call_soon_threadsafe(self.settle, window)

    async def stop(self) -> None:
        self.stopping = True
        await asyncio.to_thread(self.join)


def _loop_signal(
    handle: Any, client_id: str, role: str, loop: asyncio.AbstractEventLoop
) -> QueueEvents | str:
    """librdkafka's queue signal for ``handle`` (:func:`.rdkafka_io.attach`), if ``loop``
    can watch its socket; else why not (the caller falls back to a thread)."""
    events = attach(handle, client_id, role)
    if isinstance(events, QueueEvents):
        try:
            loop.add_reader(events.fileno(), _nothing)
            loop.remove_reader(events.fileno())
        except NotImplementedError:  # a loop without add_reader (Windows' proactor)
            events.close()
            return "the event loop cannot watch a socket (no add_reader)"
    return events


def _deliveries(
    producer: Any,
    client_id: str,
    loop: asyncio.AbstractEventLoop,
    settle: Callable[[list[Any]], None],
) -> _Deliveries:
    """Reports served on the loop where librdkafka can signal it, else a delivery thread."""
    events = _loop_signal(producer, client_id, "producer", loop)
    if isinstance(events, QueueEvents):
        deliveries = _LoopDeliveries(producer, loop, settle, events)
        deliveries.start()
        return deliveries
    log.info("kafka confluent engine: delivery reports served by a thread: %s", events)
    thread = _DeliveryThread(producer, loop, settle)
    thread.start()
    return thread


class ConfluentProducer(ProducerBase):
    """The client's one librdkafka producer and its delivery thread (started on first
    use), shared by every channel."""

    producer: Any = None
    """The librdkafka producer once started, else None."""
    _pump: _Deliveries | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _room: asyncio.Event
    """Set on the loop whenever deliveries were reported: librdkafka's queue has room
    again (made when the producer starts)."""

    async def get(self) -> Any:
        """The shared producer, started now if it is not yet."""
        if self.producer is not None:
            return self.producer
        async with self._lock:
            self._check_open()
            if self.producer is None:
                conf = librdkafka_producer(self._section)
                producer = _construct(Producer, conf, self._section)
                self._loop = asyncio.get_running_loop()
                self._room = asyncio.Event()
                client_id = str(conf.get("client.id", "rdkafka"))
                self._pump = _deliveries(producer, client_id, self._loop, self._settled)
                self.producer = producer
            return self.producer

    def _settled(self, window: list[Any]) -> None:
        _settle(window)
        self._room.set()

    async def _produce_when_room(self, produce: Callable[[], None]) -> None:
        """librdkafka's queue is full: try again each time deliveries have been reported
        (which frees room), never on a timer. The deadline, which cancels this task while a
        record is not yet handed over, bounds the wait. The event is cleared before each
        try, so a report between a failed try and the wait is not missed."""
        while True:
            self._room.clear()
            try:
                produce()
                return
            except BufferError:
                pass
            await self._room.wait()

    async def send(self, topic: str, payload: bytes, headers: Headers, watch: PendingSend) -> int:
        producer = self.producer or await self.get()
        assert self._loop is not None and self._pump is not None
        record = _Records(self._loop.create_future(), self._pump, 1)
        try:
            if headers is None:
                producer.produce(topic, payload, partition=0, on_delivery=record.deliver)
            else:
                producer.produce(
                    topic, payload, partition=0, headers=headers, on_delivery=record.deliver
                )
        except BufferError:
            await self._produce_when_room(
                lambda: producer.produce(
                    topic, payload, partition=0, headers=headers, on_delivery=record.deliver
                )
            )
        except KafkaException as exc:
            raise raised(exc) from exc
        watch.future = record.future
        return (await record.future)[0]

    async def send_many(
        self, topic: str, payloads: Sequence[bytes], headers: Headers, watch: PendingSend
    ) -> list[int]:
        producer = self.producer or await self.get()
        assert self._loop is not None and self._pump is not None
        records = _Records(self._loop.create_future(), self._pump, len(payloads))
        deliver = records.deliver
        produce = producer.produce
        if headers is None:  # one call hands librdkafka the whole pack (no headers in it)
            await self._produce_batch(producer, topic, [{"value": p} for p in payloads], deliver)
            watch.future = records.future
            return await records.future
        try:
            for payload in payloads:
                try:
                    produce(topic, payload, partition=0, headers=headers, on_delivery=deliver)
                except BufferError:
                    await self._produce_when_room(
                        lambda p=payload: produce(  # type: ignore[misc]
                            topic, p, partition=0, headers=headers, on_delivery=deliver
                        )
                    )
        except KafkaException as exc:
            raise raised(exc) from exc
        watch.future = records.future
        return await records.future

    async def _produce_batch(
        self, producer: Any, topic: str, messages: list[dict[str, Any]], deliver: Any
    ) -> None:
        """``produce_batch``; records librdkafka could not queue (a full queue) are
        queued again, in order, each time deliveries have been reported (see
        :meth:`_produce_when_room`)."""
        while True:
            self._room.clear()
            try:
                queued = producer.produce_batch(topic, messages, partition=0, on_delivery=deliver)
            except BufferError:
                queued = 0
            except KafkaException as exc:
                raise raised(exc) from exc
            if queued == len(messages):
                return
            failed = [m for m in messages if "_error" in m]
            if len(failed) != len(messages) - queued:  # another failure than a full queue
                raise kafka_errors.KafkaError(str(failed[0]["_error"]) if failed else "")
            for message in failed:
                error = message.pop("_error")
                code = error.code() if isinstance(error, KafkaError) else None
                if code not in (None, KafkaError._QUEUE_FULL):
                    raise library_error(error)
            messages = failed
            await self._room.wait()

    def too_large(self, exc: BaseException) -> bool:
        return isinstance(exc, kafka_errors.MessageSizeTooLargeError)

    async def close(self) -> None:
        """Stop serving reports on the loop or the delivery thread, then let librdkafka
        deliver what is pending (within the deadline), drop what it could not, and settle
        those sends."""
        producer, self.producer = self.producer, None
        pump, self._pump = self._pump, None
        if producer is None or pump is None:
            return
        await pump.stop()
        await asyncio.to_thread(_flush_or_drop, producer, self._deadline_s)
        _settle(pump.window)


PURGED_S = 1.0
"""How long closing waits for the reports of records it purged (librdkafka makes them at
once; in-flight requests are given up without waiting for the broker)."""


def _flush_or_drop(producer: Any, timeout_s: float) -> None:
    """Deliver what is queued within ``timeout_s``; purge what is left and serve its
    delivery reports (an error each); then destroy the producer (``Producer.close``),
    which stops its threads at once even while Python objects still refer to it.

    Purged first, because a record librdkafka still holds keeps its delivery callback,
    which refers back to the producer through its send: a cycle the garbage collector
    cannot see into, which kept the producer and its threads (retrying a broker that
    refuses it, say) alive for good; and ``close`` itself waits for every record until
    its ``message.timeout.ms``."""
    if producer.flush(timeout_s):
        producer.purge()
        producer.flush(PURGED_S)
    close = getattr(producer, "close", None)  # older confluent-kafka releases have none
    if close is not None and not len(producer):
        close()


# -- reading ---------------------------------------------------------------------------


class ConfluentReader:
    """A librdkafka consumer of one partition, assigned explicitly. The loop waits for its
    records on librdkafka's queue signal and takes them without blocking (see
    :mod:`.rdkafka_io`); where that cannot be attached, a fetch thread blocks in
    ``poll()`` instead."""

    def __init__(
        self, section: KafkaConfig, channel: str, subname: str, calls: BrokerCalls, grouped: bool
    ):
        self._section = section
        # librdkafka wants a group.id even where nothing is committed (not ``grouped``).
        self._conf = librdkafka_consumer(section, subname)
        self._group = f"consumer group {subname!r}"
        self._channel = channel
        self._partition = TopicPartition(channel, 0)
        self._timeout = calls.deadline_s
        self._consumer: Any = None
        self._events: QueueEvents | None = None
        """The consumer queue's signal; None: records come through the fetch thread."""
        self._signal: asyncio.Future[None] | None = None
        """Set when the queue signals; a watch is on while it is pending."""
        self._fetcher = ThreadPoolExecutor(1, thread_name_prefix="msgstream-kafka-fetch")
        self._inflight: asyncio.Future[list[Any]] | None = None
        self._batch = TAKE_BATCH
        self._failed: KafkaError | None = None
        """An error record met in a fetch: raised by the next one."""

    async def start(self) -> None:
        self._consumer = _construct(Consumer, self._conf, self._section)
        loop = asyncio.get_running_loop()
        events = _loop_signal(self._consumer, self._conf["client.id"], "consumer", loop)
        if isinstance(events, QueueEvents):
            self._events = events
            return
        log.info("kafka confluent engine: records fetched by a thread: %s", events)

    async def _blocking(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call`` in a worker thread; librdkafka's failures as aiokafka's. A retriable
        failure (a group coordinator moving or loading, as when the broker makes its
        offsets topic) is retried every :data:`RETRY_S` until the caller's deadline."""
        while True:
            try:
                result = await asyncio.to_thread(call, *args, **kwargs)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and _worth_retrying(error):
                    await asyncio.sleep(RETRY_S)
                    continue
                raise raised(exc, self._group) from exc
            partitions = result if isinstance(result, list) else ()
            error = next((p.error for p in partitions if p.error is not None), None)
            if error is None:
                return result
            if not _worth_retrying(error):
                raise library_error(error, self._group)
            await asyncio.sleep(RETRY_S)

    async def committed(self) -> int | None:
        (found,) = await self._blocking(
            self._consumer.committed, [self._partition], timeout=self._timeout
        )
        offset: int = found.offset
        return None if offset < 0 else offset

    async def _watermarks(self) -> tuple[int, int]:
        found: tuple[int, int] = await self._blocking(
            self._consumer.get_watermark_offsets,
            self._partition,
            timeout=self._timeout,
            cached=False,
        )
        return found

    async def first_offset(self) -> int:
        return (await self._watermarks())[0]

    async def end_offset(self) -> int:
        return (await self._watermarks())[1]

    def end_seen(self) -> int | None:
        found = self._consumer.get_watermark_offsets(self._partition, cached=True)
        if found is None or found[1] < 0:  # librdkafka's OFFSET_INVALID: none fetched yet
            return None
        end: int = found[1]
        return end

    async def _drop_inflight(self) -> None:
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            await asyncio.wait([inflight])
            if not inflight.cancelled():
                inflight.exception()  # retrieved: what a dropped fetch met does not matter

    async def position(self, offset: int) -> None:
        await self._drop_inflight()
        self._failed = None
        try:
            self._consumer.assign([TopicPartition(self._channel, 0, offset)])
        except KafkaException as exc:
            raise raised(exc) from exc

    def _consume(self, max_records: int) -> list[Any]:
        """In the fetch thread: wait for the first record, then take what is there."""
        consumer = self._consumer
        first = consumer.poll(POLL_S)
        if first is None:
            return []
        if max_records == 1:
            return [first]
        return [first, *consumer.consume(max_records - 1, 0)]

    def _start_fetch(self, max_records: int) -> asyncio.Future[list[Any]]:
        self._batch = max_records
        loop = asyncio.get_running_loop()
        self._inflight = loop.run_in_executor(self._fetcher, self._consume, max_records)
        return self._inflight

    def _columns(self, msgs: list[Any]) -> Fetched:
        """The fetched records as columns; an error record ends them (raised next time)."""
        if any(m.error() is not None for m in msgs):
            for index, msg in enumerate(msgs):
                if msg.error() is not None:
                    self._failed = msg.error()
                    msgs = msgs[:index]
                    break
        return Fetched(
            [m.offset() for m in msgs], [m.value() for m in msgs], [m.headers() for m in msgs]
        )

    def _took(self, inflight: asyncio.Future[list[Any]]) -> Fetched:
        """The result of the finished fetch ``inflight``; starts the next one when it came
        back full (more is likely waiting)."""
        if self._inflight is inflight:
            self._inflight = None
        try:
            msgs = inflight.result()
        except KafkaException as exc:
            raise raised(exc) from exc
        if len(msgs) >= self._batch and self._inflight is None:
            self._start_fetch(self._batch)
        return self._columns(msgs)

    async def fetch(self, max_records: int) -> Fetched:
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise library_error(failed)
        if self._events is not None:
            self._batch = max_records
            return await self._signalled(self._events, max_records)
        inflight = self._inflight or self._start_fetch(max_records)
        await asyncio.shield(inflight)  # cancelled: the fetch goes on, kept for next time
        return self._took(inflight)

    def _take(self, events: QueueEvents, max_records: int) -> Fetched | None:
        """What librdkafka holds now (at most ``max_records``), without waiting."""
        events.drained()  # first: a signal sent while consume() runs stays for next time
        try:
            msgs = self._consumer.consume(max_records, 0)
        except KafkaException as exc:
            raise raised(exc) from exc
        return self._columns(msgs) if msgs else None

    async def _signalled(self, events: QueueEvents, max_records: int) -> Fetched:
        """Records as soon as librdkafka signals them, or none after :data:`FETCH_WAIT_S`
        (or once the reader stops). Nothing is lost when cancelled: unread records stay
        in librdkafka's queue."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FETCH_WAIT_S
        while self._events is events:
            found = self._take(events, max_records)
            if found is not None:
                return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            signal = self._signal
            if signal is None or signal.done():  # one watch, shared by every waiter
                signal = self._signal = loop.create_future()
                loop.add_reader(events.fileno(), self._wake)
            await asyncio.wait([signal], timeout=remaining)
        return Fetched([], [], [])

    def _wake(self) -> None:
        """The queue signalled (or the reader stops): end the watch, wake the waiters."""
        events, signal = self._events, self._signal
        if events is not None:
            asyncio.get_running_loop().remove_reader(events.fileno())
        if signal is not None and not signal.done():
            signal.set_result(None)

    def ready(self) -> Fetched | None:
        if self._events is not None:
            return None if self._failed is not None else self._take(self._events, self._batch)
        inflight = self._inflight
        if inflight is None or not inflight.done() or self._failed is not None:
            return None
        if inflight.exception() is not None:
            return None  # fetch() raises it
        return self._took(inflight)

    async def commit(self, offset: int) -> None:
        await self._blocking(
            self._consumer.commit,
            offsets=[TopicPartition(self._channel, 0, offset)],
            asynchronous=False,
        )

    async def stop(self) -> None:
        await self._drop_inflight()
        if self._events is not None:  # before the consumer goes: the queue is its own
            self._wake()
            events, self._events = self._events, None
            events.close()
        consumer, self._consumer = self._consumer, None
        try:
            if consumer is not None:
                await asyncio.wait_for(self._blocking(consumer.close), self._timeout)
        finally:
            self._fetcher.shutdown(wait=False)


def _nothing() -> None:
    """A reader callback that is never called (probing that the loop can watch a socket)."""


ENGINE = Engine("confluent", ConfluentProducer, ConfluentReader)
