"""Letting the source close when Spark stops its driver-side runner.

Spark runs a Python streaming source's planning in a process of its own, PySpark's
:data:`SOURCE_RUNNER_MODULE`, one per query. When the query stops, Spark ends that
process with SIGTERM (``Process.destroy``) instead of asking it to finish. Python's
default disposition for SIGTERM ends a process on the spot, so the runner's own
``finally: reader.stop()`` never runs, and nor does anything the source's ``stop``
would close:

- the planner's consumers, and their subscription, which on Pulsar is durable and keeps
  the channels' backlog from retention until someone drops it;
- the driver's read-only rocksmq store, whose secondary instance leaves a directory
  under the temporary directory, one per query.

:func:`stop_on_sigterm` makes SIGTERM raise ``SystemExit`` in that process instead, so
the runner unwinds through its ``finally`` and ``stop`` runs. (The warm runner's client
passes SIGTERM on to the runner it stands for and waits for its exit, so the same holds
there.) Four details:

- the exit is raised at once only while the runner waits for Spark's next call. During a
  call (:meth:`SigtermExit.busy`: the source's event loop is running) it is raised when
  the call returns: raised inside the loop it could cut a callback short and leave a
  waiter that ``stop`` then waits on forever. While the source's close is running
  (a function marked :func:`closes` is on the main thread's stack) it is not raised at
  all: Spark also closes the runner's socket, which sends the runner into ``stop`` by
  itself, and a SIGTERM handled then -- the warm runner's client passes it on later than
  the socket's end arrives, and Python runs a handler at the next function it enters,
  which may be the close itself -- would cut the close short before its first line;
- Spark sends SIGTERM twice in a row (``stopWorker``, then its factory's ``stop``), so
  later ones are ignored;
- a timer gives the call and ``stop`` :data:`STOP_GRACE_S` seconds, after which SIGALRM's
  default action ends the process wherever it is. Shortly before, :mod:`faulthandler`
  writes every thread's stack to stderr (Spark passes it on to the driver's): a runner
  ended that way says where its stop was stuck, which nothing else would;
- once the source has closed (:meth:`SigtermExit.closed`), a connection error nobody
  caught ends the runner without a traceback: it is PySpark reporting the runner's end
  on the socket Spark has already closed.
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import CodeType, FrameType, TracebackType
from typing import TypeVar

from .warm_client import SOURCE_RUNNER_MODULE

SIGTERM_STATUS = 128 + signal.SIGTERM
"""The exit status of a runner ended by SIGTERM, as a shell reports a signal's."""

STOP_GRACE_S = 15.0
"""How long a runner told to stop may take to finish its call and close what the source
opened (each broker call has its own deadline too, ``msgstream.operation_timeout_s``)."""

DUMP_AT = 0.9
"""When, as a share of the grace, a runner still stopping writes its threads' stacks."""

_F = TypeVar("_F", bound=Callable[..., object])
_CLOSES: set[CodeType] = set()


def closes(function: _F) -> _F:
    """Mark ``function`` as (part of) the source's close: a SIGTERM handled while it runs
    is not raised, not even at its first instruction, before it could say so itself."""
    _CLOSES.add(function.__code__)
    return function


def _closing(frame: FrameType | None) -> bool:
    """Whether a function marked :func:`closes` is on the stack from ``frame`` down."""
    while frame is not None:
        if frame.f_code in _CLOSES:
            return True
        frame = frame.f_back
    return False


def in_source_runner() -> bool:
    """Whether this process is a streaming source's runner: ``__main__`` is PySpark's
    runner module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == SOURCE_RUNNER_MODULE


class SigtermExit:
    """SIGTERM as ``SystemExit(SIGTERM_STATUS)``, held back while :meth:`busy`."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.installed = False
        self._busy = 0
        self._requested = False
        self._closed = False
        self._excepthook = sys.excepthook

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_sigterm)
        sys.excepthook = self._on_uncaught
        self.installed = True

    def closed(self) -> None:
        """The source has closed. From now on the connection to Spark failing is no news:
        Spark closed it as it stopped the query, and when the close took a while the
        runner's last write to it (PySpark's, reporting how the runner ended) fails;
        its traceback is not printed."""
        self._closed = True

    def _on_uncaught(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        if self._closed and issubclass(kind, ConnectionError):
            return
        self._excepthook(kind, value, tb)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, self.grace_s)
        with contextlib.suppress(ValueError, RuntimeError, AttributeError):  # no usable stderr
            faulthandler.dump_traceback_later(self.grace_s * DUMP_AT, exit=False)
        if _closing(frame):
            return
        if self._busy:
            self._requested = True
            return
        raise SystemExit(SIGTERM_STATUS)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """A call in progress: a SIGTERM meanwhile exits when it ends."""
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            if self._requested and not self._busy:
                self._requested = False
                raise SystemExit(SIGTERM_STATUS)


def stop_on_sigterm(grace_s: float = STOP_GRACE_S) -> SigtermExit:
    """In a source runner, make SIGTERM end the process through ``SystemExit`` (see the
    module's text); wrap each call in the result's :meth:`~SigtermExit.busy`. Anywhere
    else -- the user's own driver, tests, another thread than the main one (where
    handlers cannot be set) -- or when SIGTERM or SIGALRM already has a handler that is
    not the default, nothing is installed (``installed`` is False) and ``busy`` does
    nothing."""
    exit_ = SigtermExit(grace_s)
    if not in_source_runner() or threading.current_thread() is not threading.main_thread():
        return exit_
    if any(signal.getsignal(s) is not signal.SIG_DFL for s in (signal.SIGTERM, signal.SIGALRM)):
        return exit_
    exit_.install()
    return exit_
