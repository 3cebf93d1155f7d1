"""The broker fixtures' report hook (``brokers/fixtures.py``): a failing test says which
broker process crashed, and the first failure after the crash shows the end of its log.
A stand-in process plays the crashed broker, so no JVM is needed."""

from __future__ import annotations

import pytest

CRASHED_BROKER = """
import subprocess
import sys

import pytest

from brokers.jvm import JvmBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = JvmBroker(tmp_path_factory.mktemp("broker"))
    broker.logs_dir.mkdir(parents=True)
    broker.log_path.write_text("started\\njava.lang.OutOfMemoryError: Java heap space\\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    broker._adopt(process)
    yield broker
    broker.kill()


def test_first(broker):
    assert "sent" == "acknowledged"


def test_second(broker):
    assert "sent" == "acknowledged"


def test_passes(broker):
    pass
"""


def test_a_failure_names_the_crashed_broker_and_the_first_shows_its_log(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(CRASHED_BROKER)
    result = pytester.runpytest(
        "-p", "brokers.fixtures", "-p", "no:asyncio", "-p", "no:looptime_plugin"
    )
    result.assert_outcomes(failed=2, passed=1)
    out = result.stdout.str()
    exited = "exited (code 3) with no test stopping it"
    assert out.count(exited) == 2
    assert out.count(f"{exited}; the end of its log:") == 1
    assert out.count("java.lang.OutOfMemoryError: Java heap space") == 1
    assert out.index("java.lang.OutOfMemoryError") < out.index("_ test_second _")


def test_no_crash_no_word(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_fails():\n    assert 1 == 2\n")
    result = pytester.runpytest(
        "-p", "brokers.fixtures", "-p", "no:asyncio", "-p", "no:looptime_plugin"
    )
    result.assert_outcomes(failed=1)
    assert "broker" not in result.stdout.str()
