"""Session fixtures that provide a real broker, or fail under CI when none can start.

Each broker module exposes ``provide(workdir) -> endpoint`` choosing, in order: an
address from the environment, a testcontainers container when a Docker daemon answers,
then a local JVM process. Outside CI a broker that cannot start skips its tests (a
developer without Java can still run the rest); with ``CI=true`` it fails them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .jvm import JvmBroker, exited_unasked


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _start_or_fail(what: str, start: Callable[[], Any]) -> Any:
    try:
        return start()
    except Exception as exc:  # any failure to start means the same thing here
        message = f"{what} broker could not start: {type(exc).__name__}: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def provide_kafka(workdir: Path) -> Any:
    from . import kafka

    return kafka.provide(workdir)


def provide_pulsar(workdir: Path) -> Any:
    from . import pulsar

    return pulsar.provide(workdir)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    endpoint = _start_or_fail("Kafka", lambda: provide_kafka(tmp_path_factory.mktemp("kafka")))
    yield endpoint
    endpoint.close()


@pytest.fixture(scope="session")
def pulsar_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    endpoint = _start_or_fail("Pulsar", lambda: provide_pulsar(tmp_path_factory.mktemp("pulsar")))
    yield endpoint
    endpoint.close()


_TOLD: set[JvmBroker] = set()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report says which broker processes have crashed, with the first
    report after a crash showing the end of that broker's log: what every later failure
    against it comes from."""
    report = yield
    if report.failed:
        for broker in exited_unasked():
            said = f"{type(broker).__name__} under {broker.workdir} exited"
            said += f" (code {broker.exit_code}) with no test stopping it"
            if broker not in _TOLD:
                _TOLD.add(broker)
                said += f"; the end of its log:\n{broker.log_tail()}"
            report.sections.append(("a broker crashed", said))
    return report
