"""A streaming query's runner forked from a warm interpreter (``bridge_spark.process.warm_client``
and ``bridge_spark.process.warm_runner``): the child is the process Spark asked for -- its
arguments, environment, directory, streams and exit status -- and anything the runner
cannot serve exactly runs cold, as ``python -m`` would.

These tests stand in for Spark's JVM: the test process is the parent the client and the
runner are keyed to, and a small module on ``PYTHONPATH`` stands in for Spark's runner.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from msgstream.bridge_spark.process import warm_client
from msgstream.bridge_spark.process.launcher import launcher_script
from msgstream.bridge_spark.process.launcher import warm_client as client_script
from msgstream.bridge_spark.process.warm_runner import refusal
from spark.probes import probe_query

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="Linux pidfds only")

WAIT_S = 120
"""How long a process may take to start, answer or end (a deadline, never a pause): an
interpreter that imports msgstream and numpy can take tens of seconds on a loaded machine."""
PYTHON = sys.executable
CLIENT = str(client_script())
TARGET = "warm_target"
TARGET_CODE = """
import json, os, random, signal, sys, time

import numpy

IMPORTED_AS = __name__  # the runner imports it once; each child runs it as __main__


def on_term(number, frame):
    os.write(1, b"got SIGTERM\\n")  # not print: the main thread may be inside one
    sys.exit(7)


def main(mode):
    signal.signal(signal.SIGTERM, on_term)
    report = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "marker": os.environ.get("WARM_TEST_MARKER"),
        "preloaded": "msgstream.bridge_spark.data.source" in sys.modules,
        "backends": [m for m in sys.modules if m.startswith("msgstream.backends.")],
        "stdin": sys.stdin.readline().strip() if mode == "stdin" else None,
        "draws": [random.getrandbits(60), int(numpy.random.randint(1 << 60))],
    }
    print(json.dumps(report), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if mode == "exit3":
        sys.exit(3)
    if mode == "raise":
        raise RuntimeError("target failed")
    if mode == "message":
        sys.exit("a message")
    if mode == "sleep":  # short sleeps: a SIGTERM caught just before one is handled soon
        for _ in range(1200):
            time.sleep(0.05)


if __name__ == "__main__":
    main(sys.argv[1])
"""


@pytest.fixture(scope="module")
def place() -> Iterator[dict[str, str]]:
    """A short temporary directory (socket paths are limited to ~100 bytes) holding the
    target module, and the environment that puts it on the path."""
    folder = tempfile.mkdtemp(prefix="mw", dir="/tmp")
    Path(folder, "lib").mkdir()
    Path(folder, "lib", f"{TARGET}.py").write_text(TARGET_CODE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(TMPDIR=folder, PYTHONPATH=str(Path(folder, "lib")), PYTHONHASHSEED="0")
    yield env
    shutil.rmtree(folder, ignore_errors=True)


def socket_of(env: dict[str, str]) -> str:
    found = warm_client.socket_path(PYTHON, os.getpid(), env)
    assert found is not None
    assert found.startswith(env["TMPDIR"])
    return found


def start_runner(env: dict[str, str], parent: int, *modules: str) -> subprocess.Popen[bytes]:
    runner = subprocess.Popen(
        [PYTHON, "-m", warm_client.RUNNER_MODULE, socket_of(env), str(parent), *modules],
        env=env,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(socket_of(env)):
        assert runner.poll() is None, runner.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return runner


@pytest.fixture(scope="module")
def runner(place: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    started = start_runner(place, os.getpid(), TARGET)
    yield started
    started.kill()
    started.wait()


def client(env: dict[str, str], *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "-I", "-S", CLIENT, PYTHON, "-m", TARGET, *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def run(
    env: dict[str, str], *args: str, stdin: str = "", cwd: str | None = None
) -> tuple[int, dict[str, Any], str]:
    started = client(env, *args, cwd=cwd)
    out, err = started.communicate(stdin, timeout=WAIT_S)
    return started.returncode, json.loads(out.splitlines()[0]), err


def test_the_child_is_the_process_spark_asked_for(
    place: dict[str, str], runner: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    env = {**place, "WARM_TEST_MARKER": "from the client"}
    status, report, err = run(env, "stdin", "two", stdin="a line\n", cwd=str(tmp_path))
    assert status == 0
    assert report["ppid"] == runner.pid  # forked by the runner, not started cold
    assert report["preloaded"] is True
    assert set(report["backends"]) >= {  # every installed backend's client, Kafka's included
        "msgstream.backends.kafka.client",
        "msgstream.backends.pulsar.client",
        "msgstream.backends.rocksmq.client",
    }
    assert report["argv"] == ["stdin", "two"]
    assert report["cwd"] == str(tmp_path) == report["path0"]
    assert report["marker"] == "from the client"
    assert report["stdin"] == "a line"
    assert err == "to stderr\n"


def test_children_draw_different_random_numbers(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    """Forked from one runner that imported numpy and random once, each child still draws
    its own numbers, as a new interpreter would (both libraries reseed a forked child;
    a runner that handed children its state some other way would break this)."""
    first, second = (run(place, "plain")[1] for _ in range(2))
    assert first["ppid"] == second["ppid"] == runner.pid
    assert first["draws"][0] != second["draws"][0]  # Python's random: reseeded at fork
    assert first["draws"][1] != second["draws"][1]  # numpy's global generator


@pytest.mark.parametrize(
    ("mode", "status", "in_err"),
    [("exit3", 3, None), ("raise", 1, "RuntimeError: target failed"), ("message", 1, "a message")],
)
def test_the_childs_exit_is_the_clients(
    place: dict[str, str],
    runner: subprocess.Popen[bytes],
    mode: str,
    status: int,
    in_err: str | None,
) -> None:
    got, report, err = run(place, mode)
    assert report["ppid"] == runner.pid
    assert got == status
    assert (in_err or "to stderr") in err


def test_a_signal_to_the_client_reaches_the_child(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    started = client(place, "sleep")
    assert started.stdout is not None
    report = json.loads(started.stdout.readline())
    assert report["ppid"] == runner.pid
    started.send_signal(signal.SIGTERM)
    assert started.wait(timeout=WAIT_S) == 7
    assert started.stdout.read() == "got SIGTERM\n"


def _blocked(pid: int, tid: int) -> int:
    """The signal mask of thread ``tid`` of process ``pid``."""
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigBlk for thread {tid}")


def test_only_the_childs_main_thread_takes_signals(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    """The child's thread that watches the client blocks every signal, so a forwarded
    SIGTERM always reaches the main thread, where Python runs the target's handler (one
    that reached the watch thread waited for the main thread to wake: a flaky hang)."""
    started = client(place, "sleep")
    assert started.stdout is not None
    child = json.loads(started.stdout.readline())["pid"]
    try:
        threads = sorted(int(t.name) for t in Path(f"/proc/{child}/task").iterdir())
        term = 1 << (signal.SIGTERM - 1)
        assert len(threads) == 2 and threads[0] == child  # the main thread and the watch
        assert not _blocked(child, child) & term
        assert _blocked(child, threads[1]) & term
        assert _blocked(child, threads[1]) & (1 << (signal.SIGINT - 1))
    finally:
        started.send_signal(signal.SIGTERM)
        assert started.wait(timeout=WAIT_S) == 7


def test_a_killed_client_takes_its_child_with_it(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    started = client(place, "sleep")
    assert started.stdout is not None
    child = json.loads(started.stdout.readline())["pid"]
    started.kill()
    started.wait(timeout=WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while (
        Path(f"/proc/{child}").exists()
        and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    ):
        assert time.monotonic() < deadline, "the child outlived its client"
        time.sleep(0.05)


def test_another_interpreter_set_up_runs_cold(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    """A different PYTHONHASHSEED is another socket: no runner there, so the client runs
    cold (its own pid: exec) and starts one for next time."""
    env = {**place, "PYTHONHASHSEED": "1"}
    started = client(env, "plain")
    out, _ = started.communicate(timeout=WAIT_S)
    assert started.returncode == 0
    report = json.loads(out.splitlines()[0])
    assert report["pid"] == started.pid
    assert report["preloaded"] is False
    other = socket_of(env)
    assert other != socket_of(place)
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(other):  # the runner it started, serving Spark's module only
        assert time.monotonic() < deadline
        time.sleep(0.05)
    again = client(env, "plain")
    out, _ = again.communicate(timeout=WAIT_S)
    assert json.loads(out.splitlines()[0])["pid"] == again.pid  # refused: not served
    os.unlink(other)  # that runner lives as long as this test process; it is harmless


def test_a_runner_ends_with_its_driver(place: dict[str, str]) -> None:
    driver = subprocess.Popen(["sleep", "300"])
    env = {**place, "PYTHONHASHSEED": "2"}
    path = warm_client.socket_path(PYTHON, driver.pid, env)
    assert path is not None
    runner = subprocess.Popen(
        [PYTHON, "-m", warm_client.RUNNER_MODULE, path, str(driver.pid), TARGET], env=env
    )
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(path):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    assert runner.wait(timeout=WAIT_S) == 0
    assert not os.path.exists(path)


def test_a_second_runner_on_a_live_socket_leaves(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    second = subprocess.run(
        [PYTHON, "-m", warm_client.RUNNER_MODULE, socket_of(place), str(os.getpid()), TARGET],
        env=place,
        timeout=WAIT_S,
        check=False,
    )
    assert second.returncode == 0
    assert runner.poll() is None
    assert run(place, "plain")[1]["ppid"] == runner.pid


REQUEST = {
    "argv": ["-m", TARGET, "x"],
    "python": PYTHON,
    "cwd": "/",
    "env": {"PYTHONHASHSEED": "0"},
}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({}, None),
        ({"argv": ["-c", "pass"]}, "not a python -m run"),
        ({"argv": ["-m", "other"]}, "module 'other' is not served warm"),
        ({"python": "/usr/bin/python9"}, "another interpreter"),
        ({"env": {"PYTHONHASHSEED": "1"}}, "another interpreter start-up environment"),
        ({"env": {"PYTHONHASHSEED": "0", "LC_ALL": "C"}}, "another interpreter start-up"),
        ({"env": {"PYTHONHASHSEED": "0", "PYTHON_WORKER_FACTORY_PORT": "1"}}, None),
        ({"cwd": None}, "no working directory"),
    ],
)
def test_what_the_runner_refuses(change: dict[str, Any], why: str | None) -> None:
    found = refusal(
        {**REQUEST, **change}, PYTHON, {"PYTHONHASHSEED": "0", "SPARK_X": "1"}, [TARGET]
    )
    assert (found is None) if why is None else (found is not None and found.startswith(why))


def test_the_launcher_sends_only_the_runner_module_to_the_client(tmp_path: Path) -> None:
    """The launcher runs the client for Spark's streaming runner and the interpreter
    itself for anything else (the daemon, the workers)."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    fake.chmod(0o755)
    script = tmp_path / "launcher"
    script.write_text(launcher_script(str(fake), [], Path("/the/client.py")))
    script.chmod(0o755)

    def argv(*args: str) -> list[str]:
        done = subprocess.run([str(script), *args], capture_output=True, text=True, check=True)
        return done.stdout.split("|")[:-1]

    runner = warm_client.WARM_MODULES[0]
    assert argv("-m", runner) == ["-I", "-S", "/the/client.py", str(fake), "-m", runner]
    assert argv("-m", "pyspark.daemon") == ["-m", "pyspark.daemon"]
    assert argv("-m", f"{runner}x") == ["-m", f"{runner}x"]
    assert argv("-c", "pass") == ["-c", "pass"]


def test_without_an_archive_or_a_client_there_is_no_launcher() -> None:
    with pytest.raises(ValueError, match="no archive to leave out and no warm client"):
        launcher_script(PYTHON, [])


@pytest.mark.spark
def test_a_sessions_streaming_queries_get_warm_runners(spark: SparkSession, tmp_path: Path) -> None:
    """Through ``local_spark()``'s launcher, a query's source runner is forked by the
    warm runner of this session's JVM (the first query of a session may run cold while
    it starts one)."""

    def runner_parent() -> str:
        import os

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode()

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    driver = jvm.java.lang.ProcessHandle.current().pid()
    parents = [
        probe_query(spark, tmp_path / str(n), f"runner_parent_{n}", runner_parent, str)["runner"]
        for n in range(3)
    ]
    assert f"-m {warm_client.RUNNER_MODULE} " in parents[-1]
    assert parents[-1].split()[-1] == str(driver)  # the runner of this session's JVM
    assert parents[-1] == parents[-2]  # one runner serves query after query


def test_a_request_round_trips() -> None:
    env = {"A": "1=2", "EMPTY": "", "ODD": "caf\udce9"}  # a value with '=', a raw byte
    data = warm_client.encode_request(["-m", "mod", "", "x y"], env, "/w d", "/py")
    (length,) = warm_client._LENGTH.unpack(data[:4])
    assert length == len(data) - 4
    assert warm_client.decode_request(data[4:]) == {
        "python": "/py",
        "cwd": "/w d",
        "argv": ["-m", "mod", "", "x y"],
        "env": env,
    }


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        (["/py", "/", "3", "-m", "mod"], "a request with 3 arguments and 2 fields"),
        (["/py", "/", "-1"], "a request with -1 arguments"),
        (["/py", "/", "two"], "invalid literal"),
        (["/py", "/", "0", "NOEQUALS"], "an environment entry without '='"),
        (["/py"], "not enough values"),
    ],
)
def test_a_malformed_request_is_refused(fields: list[str], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        warm_client.decode_request("\0".join(fields).encode())


def test_a_bad_request_leaves_the_runner_serving(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    import socket

    for garbage in (b"", b"\0\0", b"\0\0\0\x05ab", b"\0\0\0\x03a\0b"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(socket_of(place))
            conn.sendall(garbage)
            conn.shutdown(socket.SHUT_WR)
            assert conn.recv(16) == b""  # no child: closed without a word
    assert runner.poll() is None
    assert run(place, "plain")[1]["ppid"] == runner.pid


def test_a_backend_library_that_is_missing_or_broken_is_left_to_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from msgstream.bridge_spark.process.warm_runner import _import_if_installed

    (tmp_path / "broken_backend_lib.py").write_text("raise RuntimeError('no licence')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _import_if_installed("no_such_backend_lib")
    assert capsys.readouterr().err == ""  # not installed: nothing to say
    _import_if_installed("broken_backend_lib")
    assert capsys.readouterr().err == (
        "warm runner: not preloaded: broken_backend_lib: RuntimeError('no licence')\n"
    )


def test_a_socket_path_too_long_or_in_a_shared_directory_means_cold(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    assert warm_client.socket_path(PYTHON, 1, {"TMPDIR": str(deep)}) is None  # > 107 bytes
    short = Path(tempfile.mkdtemp(prefix="mw", dir="/tmp"))
    try:
        found = warm_client.socket_path(PYTHON, 1, {"TMPDIR": str(short)})
        assert found is not None and len(found) <= warm_client.MAX_SOCKET_PATH
        folder = Path(found).parent
        assert folder.stat().st_mode & 0o777 == 0o700
        folder.chmod(0o770)  # someone else's group could reach the socket
        assert warm_client.socket_path(PYTHON, 1, {"TMPDIR": str(short)}) is None
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_the_socket_names_the_driver_and_the_interpreter_set_up(place: dict[str, str]) -> None:
    path = socket_of(place)
    assert Path(path).name.startswith(f"{os.getpid()}-")
    assert socket_of({**place, "PYTHON_WORKER_FACTORY_PORT": "9"}) == path  # per process
    assert socket_of({**place, "LC_ALL": "C"}) != path
    assert warm_client.socket_path("/other/python", os.getpid(), place) != path


def test_without_pidfds_the_launcher_has_no_warm_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a runner could not watch its driver (no ``os.pidfd_open``: macOS, say), the
    launcher sends everything to the interpreter, as before the warm runner."""
    from msgstream.bridge_spark.process import launcher

    monkeypatch.delattr(os, "pidfd_open")
    assert launcher.warm_client() is None
    made = launcher.worker_python(sys.executable, cache_dir=tmp_path)
    assert "warm_client" not in Path(made).read_text()


def test_a_request_over_the_limit_is_refused_before_it_is_read(
    place: dict[str, str], runner: subprocess.Popen[bytes]
) -> None:
    """The announced length is checked first: a runner never buffers more than
    MAX_REQUEST_BYTES for one request, whatever a client claims."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(socket_of(place))
        conn.settimeout(5)  # well under the runner's 10 s wait for a slow request
        announced = warm_client.MAX_REQUEST_BYTES + 1
        socket.send_fds(conn, [announced.to_bytes(4, "big")], [0, 1, 2])
        assert conn.recv(16) == b""  # closed without reading further
    assert runner.poll() is None
    assert run(place, "plain")[1]["ppid"] == runner.pid


@pytest.mark.parametrize("arguments", [[], ["/tmp/x.sock"], ["/tmp/x.sock", "jvm"]])
def test_the_runner_names_its_usage(arguments: list[str]) -> None:
    from msgstream.bridge_spark.process.warm_runner import main

    with pytest.raises(SystemExit, match=r"usage: python -m "
                                         r"msgstream\.bridge_spark\.process\.warm_runner "
                       r"SOCKET PARENT_PID \[MODULE \.\.\.\]; got \["):  # fmt: skip
        main(arguments)


def test_the_client_names_its_usage() -> None:
    done = subprocess.run(
        [PYTHON, "-I", "-S", CLIENT, PYTHON], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert done.stderr == f"usage: {warm_client.CLIENT_USAGE}; got ['{PYTHON}']\n"


def test_a_client_whose_driver_is_gone_starts_no_runner(tmp_path: Path) -> None:
    """No pidfd for the parent (it has exited): the runner could watch nothing and would
    end at once, so none is started and the query runs cold."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(ProcessLookupError):
        warm_client._start_runner(PYTHON, str(tmp_path / "x.sock"), gone.pid)
    assert list(tmp_path.iterdir()) == []  # not even its log
