"""What the local Kafka and Pulsar launchers share: owning one broker JVM process.

A :class:`JvmBroker` starts its JVM with output in ``workdir/logs``, stops it cleanly
(SIGTERM, then SIGKILL), crashes it on demand (SIGKILL, for restart tests), and makes sure
no JVM outlives the test process: the child gets SIGTERM when its parent dies, and an
``atexit`` hook kills whatever is still running.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the test process dies, even by SIGKILL."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


_RUNNING: set[JvmBroker] = set()

SHORT_LIVED_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData")
"""Every broker JVM the tests start: the client JIT only, and a single-threaded collector
(a JVM takes one collector, so the brokers' options name none). A test broker lives
minutes, most of it booting and restarting, where C2's compiler threads and G1's workers
compete for two shared cores: these halve a start's CPU and cut its time by a third or
more (Pulsar 18-30 s -> 11-14 s, Kafka 14-16 s -> 8-11 s on two loaded cores), and a test
workload never runs long enough for C2's code to pay off."""


def exited_unasked() -> list[JvmBroker]:
    """Brokers whose process has ended though no test stopped or killed it: a crash."""
    return [b for b in list(_RUNNING) if b.exit_code is not None]


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_RUNNING):
        broker.kill()


def docker_available(timeout_s: float = 3.0) -> bool:
    """True when a Docker daemon answers a ping (honours ``DOCKER_HOST``)."""
    try:
        from testcontainers.core.docker_client import DockerClient

        client = DockerClient(timeout=int(max(1, timeout_s))).client
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


class JvmBroker:
    """One broker JVM under ``workdir``; subclasses say how to start and probe it."""

    LOG_NAME = "server.log"
    """The broker's own log file under ``logs/`` (its log4j2 configuration writes it)."""

    def __init__(self, workdir: Path, *, java: str = "java", short_lived: bool = True) -> None:
        self.workdir = workdir
        self.short_lived = short_lived
        """Start with :data:`SHORT_LIVED_JVM_OPTIONS` (the tests' brokers). A benchmark's or
        a user's broker says False: its figures are those of a broker JIT-compiled as in
        production."""
        self.data_dir = workdir / "data"
        self.logs_dir = workdir / "logs"
        self.java = java
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The exit code of a broker process that has ended (None while it runs, or once
        a test stopped or killed it)."""
        return None if self._process is None else self._process.poll()

    @property
    def log_path(self) -> Path:
        return self.logs_dir / self.LOG_NAME

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the broker log and of the JVM's own output, for error messages."""
        parts = []
        for path in (self.log_path, self.logs_dir / "stdout.log"):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts) or f"(no broker output under {self.logs_dir})"

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the broker and wait until it serves clients (each broker says how)."""
        raise NotImplementedError

    def stop(self, timeout_s: float = 30.0) -> None:
        """Shut down cleanly (SIGTERM); SIGKILL if still running after ``timeout_s``."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused JVM would not act on SIGTERM
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._forget()

    def kill(self) -> None:
        """Crash the broker (SIGKILL): no clean shutdown, as a power cut would look."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            process.wait()
        self._forget()

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open but nothing is answered, as
        with a hung or partitioned server. :meth:`resume` undoes it."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGSTOP)
            _wait_until_stopped(process.pid)

    def resume(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        """Kill the broker and delete its workdir: its data goes with the workdir, so
        nothing is worth a clean shutdown (Pulsar's takes 5-8 s)."""
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _forget(self) -> None:
        _RUNNING.discard(self)
        self._process = None

    def _adopt(self, process: subprocess.Popen[bytes]) -> None:
        """Make ``process`` the broker (stopped by ``stop``/``kill``, killed at exit)."""
        self._process = process
        _RUNNING.add(self)

    def _launch_java(
        self,
        classpath: Sequence[Path],
        jvm_options: Sequence[str],
        main_class: str,
        args: Sequence[str],
        *,
        log: str = "stdout.log",
        env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``java <jvm_options> -cp <classpath> <main_class> <args>`` in ``workdir``
        with stdout and stderr appended to ``logs/<log>``; raise ``FileNotFoundError``
        naming the missing ``java``."""
        if shutil.which(self.java) is None:
            raise FileNotFoundError(f"{self.java!r} is not on PATH; the brokers need Java 17+")
        command = [
            self.java,
            *jvm_options,
            *(SHORT_LIVED_JVM_OPTIONS if self.short_lived else ()),
            "-cp",
            os.pathsep.join(str(jar) for jar in classpath),
            main_class,
            *args,
        ]
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        on_main_thread = threading.current_thread() is threading.main_thread()
        with (self.logs_dir / log).open("ab") as output:
            return subprocess.Popen(
                command,
                cwd=self.workdir,
                env=None if env is None else dict(env),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                # PDEATHSIG fires when the *thread* that forked exits, so only use it from
                # the main thread; atexit covers the rest.
                preexec_fn=_die_with_parent if sys.platform == "linux" and on_main_thread else None,
            )


_Endpoint = TypeVar("_Endpoint")
_Local = TypeVar("_Local", bound="JvmBroker")


def first_available(
    what: str,
    external: Callable[[], _Endpoint | None],
    container: Callable[[], _Endpoint],
    local: Callable[[], _Local],
    hint: str,
    error: type[Exception],
) -> _Endpoint | _Local:
    """The broker the tests use, in order: ``external()`` (an address from the
    environment), ``container()`` when a Docker daemon answers, then ``local()`` started
    here. Raises ``error`` listing every attempt that failed, with ``hint``."""
    found = external()
    if found is not None:
        return found
    failures: list[str] = []
    if docker_available():
        try:
            return container()
        except Exception as exc:
            failures.append(f"container: {type(exc).__name__}: {exc}")
    broker = local()
    try:
        broker.start()
    except Exception as exc:
        broker.kill()
        failures.append(f"local JVM: {type(exc).__name__}: {exc}")
        raise error(f"no {what} broker for the tests ({hint}):\n" + "\n".join(failures)) from exc
    return broker


def _wait_until_stopped(pid: int, timeout_s: float = 5.0) -> None:
    """Return once every thread of ``pid`` is stopped: SIGSTOP is delivered to each
    thread asynchronously, and on a loaded machine a JVM thread on the other core could
    still answer a request sent right after ``kill`` returned."""
    deadline = time.monotonic() + timeout_s
    tasks = Path(f"/proc/{pid}/task")
    while time.monotonic() < deadline:
        try:
            states = [
                (task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks.iterdir()
            ]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            states = []  # a thread ended while being read: look again
        if states and all(state in ("T", "t", "Z", "X") for state in states):
            return
        time.sleep(0.005)
    raise TimeoutError(f"broker process {pid} did not stop within {timeout_s} s")
