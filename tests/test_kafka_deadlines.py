"""SendDeadlines: the one timer behind every Kafka send's deadline.

The broker-facing behaviour (a frozen broker fails sends at the deadline) is tested on a
real broker in test_kafka_backend.py; these tests pin the timer's own rules with plain
asyncio futures: which sends expire, how, and which cancellations are not its own. They run
on a loop with a clock of its own (``helpers.loop_time``): deadlines 50 ms apart stay 50 ms
apart however loaded the machine.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from helpers.loop_time import on_loop_time
from msgstream import BackendUnavailableError
from msgstream.backends.kafka.deadlines import PendingSend, SendDeadlines


async def watched_send(deadlines: SendDeadlines, record: asyncio.Future[Any] | None) -> Any:
    """What KafkaProducer.send does around aiokafka: hand over, then wait for the ack."""
    watch = deadlines.start("topic-a", 1)
    try:
        if record is None:  # still handing the record over: waits on something else
            await asyncio.Event().wait()
        watch.future = record
        assert record is not None
        return await record
    except asyncio.CancelledError:
        deadlines.raise_if_expired(watch)
        raise
    finally:
        watch.finished = True


@on_loop_time
async def test_an_unacknowledged_record_fails_at_the_deadline() -> None:
    deadlines = SendDeadlines(0.05, "host:1")
    record: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(BackendUnavailableError) as raised:
        await watched_send(deadlines, record)
    assert loop.time() - started >= 0.05
    assert str(raised.value) == (
        "kafka at host:1: sending 1 message(s) to channel 'topic-a': not acknowledged "
        "within 0.05 s (msgstream.operation_timeout_s); they may still be written"
    )
    assert record.exception() is raised.value


@on_loop_time
async def test_a_send_still_handing_over_its_record_is_cancelled_into_the_same_error() -> None:
    deadlines = SendDeadlines(0.05, "host:1")
    task = asyncio.create_task(watched_send(deadlines, None))
    with pytest.raises(BackendUnavailableError, match=r"not acknowledged within 0\.05 s"):
        await task
    assert not task.cancelled() and task.cancelling() == 0


@on_loop_time
async def test_acknowledged_sends_never_expire_and_leave_the_queue() -> None:
    deadlines = SendDeadlines(0.05, "host:1")
    loop = asyncio.get_running_loop()
    for value in range(5):
        record: asyncio.Future[Any] = loop.create_future()
        loop.call_soon(record.set_result, value)
        assert await watched_send(deadlines, record) == value
    await asyncio.sleep(0.1)  # past every deadline: nothing fails late
    assert len(deadlines._pending) <= 1  # finished sends left from the front


@on_loop_time
async def test_a_cancellation_from_elsewhere_is_not_turned_into_a_deadline_error() -> None:
    deadlines = SendDeadlines(5.0, "host:1")
    task = asyncio.create_task(watched_send(deadlines, None))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@on_loop_time
async def test_deadlines_follow_start_order_with_one_timer() -> None:
    deadlines = SendDeadlines(0.05, "host:1")
    loop = asyncio.get_running_loop()
    first: asyncio.Future[Any] = loop.create_future()
    second: asyncio.Future[Any] = loop.create_future()
    one = asyncio.create_task(watched_send(deadlines, first))
    await asyncio.sleep(0.03)
    two = asyncio.create_task(watched_send(deadlines, second))
    await asyncio.sleep(0.03)  # the first is past its deadline, the second is not
    assert one.done() and isinstance(one.exception(), BackendUnavailableError)
    assert not two.done()
    second.set_result("acked")
    assert await two == "acked"


def test_a_pending_send_is_settled_once_finished_or_answered() -> None:
    loop = asyncio.new_event_loop()
    try:
        entry = PendingSend(0.0, None, "t", 1)  # type: ignore[arg-type]
        assert not entry.settled()
        entry.future = loop.create_future()
        assert not entry.settled()
        entry.future.set_result(1)
        assert entry.settled()
        other = PendingSend(0.0, None, "t", 1)  # type: ignore[arg-type]
        other.finished = True
        assert other.settled()
    finally:
        loop.close()
