"""SIGTERM in a streaming source's runner process unwinds it, so the source's ``stop``
runs (:mod:`msgstream.bridge_spark.process.runner_exit`); anywhere else it changes nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from msgstream.bridge_spark.process.runner_exit import SIGTERM_STATUS
from msgstream.bridge_spark.process.warm_client import SOURCE_RUNNER_MODULE

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

CHILD = textwrap.dedent(
    """
    import importlib.machinery, signal, sys, threading, time
    main = sys.modules["__main__"]
    if sys.argv[1] == "runner":  # what `python -m <runner>` gives __main__
        main.__spec__ = importlib.machinery.ModuleSpec(sys.argv[2], None)
    if sys.argv[3] == "own-handler":
        signal.signal(signal.SIGTERM, lambda *_: print("own handler", flush=True))
    from msgstream.bridge_spark.process.runner_exit import closes, stop_on_sigterm
    # a short grace only where the test waits it out: elsewhere a slow machine would
    # end the child before the test's next step
    sigterm = stop_on_sigterm(grace_s=1.0 if sys.argv[3] == "second-sigterm" else 60.0)
    said = "installed" if sigterm.installed else "unchanged"

    @closes
    def close():  # the source's stop, begun by Spark closing the socket
        if sys.argv[3] == "into-close":  # the held SIGTERM is handled here, at the start
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        with sigterm.busy():
            print("closing", flush=True)
            sys.stdin.readline()
        print("between", flush=True)  # between two closing steps
        sys.stdin.readline()
        print("closed", flush=True)

    try:
        print(said, flush=True)  # inside the try: SIGTERM may come as soon as it is read
        if sys.argv[3] == "into-close":  # a SIGTERM that came as the runner went to stop
            # Held for the main thread alone: sent to the process, the kernel could hand it
            # to another thread (numpy's OpenBLAS starts one at import) whose C handler
            # would trip Python's flag before close() is entered -- a race a loaded
            # machine decides. Sent to this thread, it waits here until close() unblocks.
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        if sys.argv[3] in ("closing", "into-close"):
            close()
            sys.exit(0)
        if sys.argv[3] in ("gone-after-close", "gone-before-close"):  # Spark's socket
            if sys.argv[3] == "gone-after-close":
                sigterm.closed()
            raise BrokenPipeError(32, "Broken pipe")
        if sys.argv[3] == "busy":  # a call of Spark's in progress
            with sigterm.busy():
                print("busy", flush=True)
                sys.stdin.readline()
                print("call done", flush=True)
        sys.stdin.readline()  # blocked, as the runner is in its socket read
    finally:
        print("stop ran", flush=True)
        if sys.argv[3] == "second-sigterm":
            print("closing", flush=True)
            time.sleep(30)
            print("closed", flush=True)
    """
)


def run_child(main: str, handler: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, main, SOURCE_RUNNER_MODULE, handler],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child


def test_sigterm_in_the_runner_runs_its_finally_and_exits_143() -> None:
    child = run_child("runner", "default")
    assert child.stdout is not None
    assert child.stdout.readline() == "installed\n"
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=30)
    assert out == "stop ran\n"
    assert child.returncode == SIGTERM_STATUS == 143


def test_sigterm_during_a_call_exits_when_the_call_ends() -> None:
    """Raised inside the source's event loop, the exit could cut a callback short."""
    child = run_child("runner", "busy")
    assert child.stdin is not None and child.stdout is not None
    assert child.stdout.readline() == "installed\n"
    assert child.stdout.readline() == "busy\n"
    child.send_signal(signal.SIGTERM)
    child.stdin.write("\n")  # the call returns
    child.stdin.flush()
    out, _ = child.communicate(timeout=30)
    assert out == "call done\nstop ran\n"
    assert child.returncode == SIGTERM_STATUS


@pytest.mark.parametrize("signalled_after", ["closing", "between"])
def test_sigterm_while_the_source_closes_cuts_nothing_short(signalled_after: str) -> None:
    """Spark may end the runner by closing its socket and signal it while ``stop``
    runs: in a closing call or between two, the rest of the closing still runs."""
    child = run_child("runner", "closing")
    assert child.stdin is not None and child.stdout is not None
    assert child.stdout.readline() == "installed\n"
    assert child.stdout.readline() == "closing\n"
    if signalled_after == "closing":
        child.send_signal(signal.SIGTERM)
    child.stdin.write("\n")  # the closing call returns
    child.stdin.flush()
    assert child.stdout.readline() == "between\n"
    if signalled_after == "between":
        child.send_signal(signal.SIGTERM)
    out, _ = child.communicate("\n", timeout=30)
    assert out == "closed\nstop ran\n"
    assert child.returncode == 0


def test_sigterm_handled_as_the_close_begins_cuts_nothing_short() -> None:
    """Spark closes the runner's socket as it signals it, so the runner may be on its way
    into ``stop`` when the SIGTERM is handled (the warm runner's client passes it on a
    little later). Python runs the handler at the next function it enters: here the
    close's first line. The close still runs to its end and the runner exits as the
    close leaves it."""
    child = run_child("runner", "into-close")
    assert child.stdin is not None and child.stdout is not None
    assert child.stdout.readline() == "installed\n"
    assert child.stdout.readline() == "closing\n"
    out, _ = child.communicate("\n\n", timeout=30)
    assert out == "between\nclosed\nstop ran\n"
    assert child.returncode == 0


@pytest.mark.parametrize("when", ["after", "before"])
def test_a_lost_connection_to_spark_is_no_news_once_the_source_closed(when: str) -> None:
    """Once the source has closed, PySpark's last write to the socket Spark closed fails:
    no traceback for that. Before, the failure is news and is printed as usual."""
    child = run_child("runner", f"gone-{when}-close")
    out, err = child.communicate(timeout=30)
    assert out == "installed\nstop ran\n"
    assert child.returncode == 1
    if when == "after":
        assert err == ""
    else:
        assert err.splitlines()[-1] == "BrokenPipeError: [Errno 32] Broken pipe"


def test_a_second_sigterm_is_ignored_and_a_hanging_close_ends_after_the_grace() -> None:
    """Spark sends two SIGTERMs at once; the second must not cut ``stop`` short. A
    ``stop`` that hangs is ended by the grace timer (SIGALRM) instead, after writing
    where it hung to stderr."""
    child = run_child("runner", "second-sigterm")
    assert child.stdout is not None
    assert child.stdout.readline() == "installed\n"
    child.send_signal(signal.SIGTERM)
    assert child.stdout.readline() == "stop ran\n"
    assert child.stdout.readline() == "closing\n"
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=20)
    assert out == ""  # never "closed": the close would take 30 s
    assert child.returncode == -signal.SIGALRM
    assert "Timeout (0:00:00.900000)!" in err  # the stacks, at 0.9 of the 1 s grace
    hung = CHILD.splitlines().index("        time.sleep(30)") + 1
    assert f'File "<string>", line {hung} in <module>' in err  # where the close hung


@pytest.mark.parametrize(
    ("main", "handler", "said", "after_sigterm", "status"),
    [
        # a user's own process (a driver, a test): SIGTERM still ends it at once
        ("user", "default", "unchanged", "", -signal.SIGTERM),
        # a handler someone set stays in charge
        ("runner", "own-handler", "unchanged", "own handler\n", None),
    ],
)
def test_sigterm_elsewhere_is_left_alone(
    main: str, handler: str, said: str, after_sigterm: str, status: int | None
) -> None:
    child = run_child(main, handler)
    assert child.stdout is not None
    assert child.stdout.readline() == f"{said}\n"
    child.send_signal(signal.SIGTERM)
    if status is None:  # the own handler returned: the child goes on until told to stop
        assert child.stdout.readline() == after_sigterm
        child.kill()
        child.communicate(timeout=30)
        return
    out, _ = child.communicate(timeout=30)
    assert out == after_sigterm
    assert child.returncode == status
