"""Background reading of one channel: receive, decode, buffer (bounded).

Undecodable messages are counted, logged with channel and MessageID, handed to an
optional callback and skipped: one bad message never stops a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .backend import ConsumedMessage, Consumer
from .codec import MessageRegistry, decode
from .errors import CodecError, UnknownMessageTypeError
from .messages import TsMsg
from .position import MsgPosition

log = logging.getLogger(__name__)

BadMessageHandler = Callable[[ConsumedMessage, CodecError], None]


@dataclass(slots=True)
class ReadStats:
    received: int = 0
    decode_errors: int = 0
    unknown_types: int = 0


class ChannelReader:
    def __init__(
        self,
        consumer: Consumer,
        *,
        registry: MessageRegistry,
        capacity: int,
        arrived: asyncio.Event,
        stats: ReadStats,
        max_message_bytes: int,
        on_bad_message: BadMessageHandler | None = None,
    ) -> None:
        self.consumer = consumer
        self.channel = consumer.channel
        self.buffer: deque[TsMsg] = deque()
        self.error: BaseException | None = None
        self._registry = registry
        self._capacity = capacity
        self._arrived = arrived
        self._space = asyncio.Event()
        self._stats = stats
        self._max_bytes = max_message_bytes
        self._on_bad = on_bad_message
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start reading (again, after a stop or after the reading task failed)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"msgstream-reader-{self.channel}"
            )

    def revive(self) -> None:
        """Restart reading if the task ended on an error that was already reported."""
        if self._task is not None and self._task.done() and self.error is None:
            self._task = None
            self.start()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def clear(self) -> None:
        self.buffer.clear()
        self.error = None
        self._space.set()

    def popleft(self) -> TsMsg:
        msg = self.buffer.popleft()
        if len(self.buffer) < self._capacity:
            self._space.set()
        return msg

    def _decode(self, raw: ConsumedMessage) -> TsMsg | None:
        try:
            msg = decode(raw.payload, self._registry, self._max_bytes)
        except CodecError as exc:
            if isinstance(exc, UnknownMessageTypeError):
                self._stats.unknown_types += 1
            else:
                self._stats.decode_errors += 1
            log.warning(
                "skipping undecodable message on channel %r at MessageID %r: %s",
                raw.channel,
                raw.msg_id,
                exc,
            )
            if self._on_bad is not None:
                try:
                    self._on_bad(raw, exc)
                except Exception:  # a failing callback must not cost the messages after it
                    log.exception("on_bad_message callback failed on channel %r", raw.channel)
            return None
        msg.position = MsgPosition(
            raw.channel, raw.msg_id.to_bytes(), self.consumer.subname, msg.timestamp
        )
        return msg

    async def _run(self) -> None:
        consumer, buffer, capacity = self.consumer, self.buffer, self._capacity
        try:
            while True:
                room = capacity - len(buffer)
                if room <= 0:
                    self._space.clear()
                    await self._space.wait()
                    continue
                raws = consumer.receive_nowait(room)
                if not raws:
                    raws = [await consumer.receive()]
                self._stats.received += len(raws)
                for raw in raws:
                    msg = self._decode(raw)
                    if msg is not None:
                        buffer.append(msg)
                self._arrived.set()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = exc
            self._arrived.set()
