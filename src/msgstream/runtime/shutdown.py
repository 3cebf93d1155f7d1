"""Graceful shutdown of a consuming or producing service on SIGINT and SIGTERM.

Containers and systemd stop a process with SIGTERM, a terminal with SIGINT (Ctrl-C). By
default the first kills a Python process on the spot and the second raises
``KeyboardInterrupt`` wherever the loop happens to be: in both cases the pack being
handled is neither acknowledged nor saved. :class:`StopOnSignals` turns either signal into
:meth:`MsgStream.stop <msgstream.streams.stream.MsgStream.stop>` on the streams it is given, so
``async for pack in stream`` ends after the pack being handled, and the code after the
loop (save positions, a final time tick, close) runs as usual::

    async with new_ttmsgstream(config) as stream, StopOnSignals(stream) as stop:
        await stream.as_consumer(channels, "billing", SubscriptionPosition.EARLIEST)
        async for pack in stream:
            handle(pack)
            save(positions_to_json(pack.end_positions))
    sys.exit(stop.exit_code)        # 0, or 130 after SIGINT, 143 after SIGTERM

A second signal of the same kind while stopping restores the previous behaviour and
re-raises it, so a stuck shutdown can still be interrupted.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterable
from typing import Protocol

from .scope import AsyncScope

__all__ = ["StopOnSignals"]


class Stoppable(Protocol):
    def stop(self) -> None: ...


class StopOnSignals(AsyncScope):
    """Stop ``streams`` (anything with a ``stop()``) on the first SIGINT or SIGTERM.

    :attr:`stopping` is set when a signal came, for loops of your own
    (``while not stop.stopping.is_set()``); :attr:`received` names the signal;
    :attr:`exit_code` is what a command-line program should exit with. The handlers are
    installed on the running event loop on entry and removed on exit.
    """

    def __init__(
        self,
        *streams: Stoppable,
        signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
    ) -> None:
        self.streams = list(streams)
        self.signals = tuple(signals)
        self.stopping = asyncio.Event()
        self.received: signal.Signals | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def exit_code(self) -> int:
        """0 when no signal came, else 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
        return 0 if self.received is None else 128 + self.received.value

    def add(self, stream: Stoppable) -> None:
        """Stop ``stream`` too (at once if a signal already came)."""
        self.streams.append(stream)
        if self.received is not None:
            stream.stop()

    def _on_signal(self, received: signal.Signals) -> None:
        if self.received is not None:  # a second signal: give the default behaviour back
            self._remove_handlers()
            signal.raise_signal(received)
            return
        self.received = received
        self.stopping.set()
        for stream in self.streams:
            stream.stop()

    def _remove_handlers(self) -> None:
        if self._loop is not None:
            for sig in self.signals:
                self._loop.remove_signal_handler(sig)
            self._loop = None

    async def _enter(self) -> None:
        self._loop = asyncio.get_running_loop()
        for sig in self.signals:
            self._loop.add_signal_handler(sig, self._on_signal, sig)

    async def _exit(self, *, clean: bool) -> None:
        self._remove_handlers()
