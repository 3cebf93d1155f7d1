"""One timer that bounds every pending send of a client by ``msgstream.operation_timeout_s``.

``asyncio.timeout`` around each send costs a timer, a cancel scope and a task lookup per
call: a noticeable share of a one-message produce, whose client-side work is otherwise a
few microseconds. Every send of a client has the same deadline, so deadlines fall due in
the order sends start: a deque in start order, with one timer armed for its oldest entry,
bounds them all.

A send that is past its deadline fails with :class:`BackendUnavailableError`:

- while aiokafka holds its record (the usual case), the record's future gets the error;
  aiokafka skips futures already done when the broker answers later;
- while it still waits to hand the record to aiokafka (metadata, a full batch), its task
  is cancelled and the send turns that cancellation into the same error.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from msgstream.errors import BackendUnavailableError


class PendingSend:
    """One send under watch. ``future`` is set once aiokafka holds the record; the send
    sets ``finished`` when it returns or raises, whatever happened."""

    __slots__ = ("count", "deadline", "expired", "finished", "future", "task", "topic")

    def __init__(self, deadline: float, task: asyncio.Task[Any], topic: str, count: int) -> None:
        self.deadline = deadline
        self.task = task
        self.topic = topic
        self.count = count
        self.future: asyncio.Future[Any] | None = None
        self.expired = False
        self.finished = False

    def settled(self) -> bool:
        return self.finished or (self.future is not None and self.future.done())


class SendDeadlines:
    def __init__(self, deadline_s: float, brokers: str) -> None:
        self.deadline_s = deadline_s
        self._brokers = brokers
        self._pending: deque[PendingSend] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def start(self, topic: str, count: int) -> PendingSend:
        """Watch a send that starts now, from the current task."""
        pending = self._pending
        while pending and pending[0].settled():  # finished sends leave from the front
            pending.popleft()
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None, "sends run in a task"
        entry = PendingSend(loop.time() + self.deadline_s, task, topic, count)
        pending.append(entry)
        if self._timer is None:
            self._timer = loop.call_at(pending[0].deadline, self._expire)
        return entry

    def error(self, entry: PendingSend) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"kafka at {self._brokers}: sending {entry.count} message(s) to channel "
            f"{entry.topic!r}: not acknowledged within {self.deadline_s:g} s "
            "(msgstream.operation_timeout_s); they may still be written"
        )

    def raise_if_expired(self, entry: PendingSend) -> None:
        """Called while handling a send's ``CancelledError``: raise the deadline's error
        instead if this watch cancelled the send; return (the caller re-raises the
        cancellation) if it came from elsewhere."""
        if entry.expired and entry.task.uncancel() == 0:
            raise self.error(entry) from None

    def _expire(self) -> None:
        self._timer = None
        pending = self._pending
        loop = asyncio.get_running_loop()
        now = loop.time()
        while pending:
            entry = pending[0]
            if not entry.settled():
                if entry.deadline > now:
                    self._timer = loop.call_at(entry.deadline, self._expire)
                    return
                entry.expired = True
                if entry.future is not None:
                    entry.future.set_exception(self.error(entry))
                else:  # still handing the record over: the send is awaiting aiokafka
                    entry.task.cancel()
            pending.popleft()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
