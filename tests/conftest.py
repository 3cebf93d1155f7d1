"""Shared fixtures: every backend the conformance suite runs on, behind one harness.

A backend joins the suite by adding a harness factory to ``BACKENDS``; the tests never
name a backend. ``tinylog`` is a plug-in defined in the tests (``plugin_backend``),
registered only while its harness exists. Broker backends (Kafka, Pulsar) start their
real broker once per session (see ``brokers.fixtures``) and, under ``CI=true``, fail
rather than skip when it cannot start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from harness import BackendHarness
from helpers.rocksmq_child import Child
from msgstream import Config, config_from_dict
from plugin_backend import plugged_in

pytest_plugins = ["brokers.fixtures", "helpers.report_retry", "pytester"]
"""The broker session fixtures (``kafka_broker``, ``pulsar_broker``) and report hooks."""


LOCAL_LIMITS = {"msgstream": {"max_message_bytes": 4 * 1024 * 1024}}
"""The embedded and Pulsar harnesses cap messages at 4 MiB (Kafka's at 1 MB, its broker's
limit): the shared oversize test builds one message over the cap inside the loop watch,
and 64 MiB of it held the loop's thread for over 100 ms of CPU on a loaded machine."""


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    return config_from_dict(
        {"mq": {"type": "memory"}, "memory": {"name": str(tmp_path)}, **LOCAL_LIMITS}, env={}
    )


def _rocksmq(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    return config_from_dict(
        {
            "mq": {"type": "rocksmq"},
            "rocksmq": {"path": str(tmp_path / "rocksmq")},
            **LOCAL_LIMITS,
        },
        env={},
    )


def _rocksmq_shared(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """rocksmq, the store owned by another process: every client of the test is attached
    to it, so each message goes from the test process through the owner and back."""
    path: Path = request.getfixturevalue("rocksmq_owner")
    return config_from_dict(
        {"mq": {"type": "rocksmq"}, "rocksmq": {"path": str(path)}, **LOCAL_LIMITS}, env={}
    )


@pytest.fixture(scope="module")
def rocksmq_owner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store owned by a separate process (``helpers/rocksmq_child.py own``), one per test
    module; it closes the store when the module is done."""
    path = tmp_path_factory.mktemp("shared") / "rocksmq"
    owner = Child("own", str(path))
    try:
        assert owner.line(timeout=60).startswith("OWNING ")
        yield path
        owner.send_line("done")
        assert owner.line(timeout=60) == "CLOSED"
    finally:
        owner.close()


def _kafka(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    broker = request.getfixturevalue("kafka_broker")
    return config_from_dict(kafka_config(broker.bootstrap), env={})


def _kafka_confluent(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """The Kafka backend on its confluent engine (librdkafka): the same broker, the same
    contract."""
    broker = request.getfixturevalue("kafka_broker")
    return config_from_dict(kafka_config(broker.bootstrap, client="confluent"), env={})


def kafka_config(bootstrap: str, **kafka: object) -> dict[str, Any]:
    """The Kafka harness config. Messages are capped below the broker's default 1 MiB
    record limit, so the shared oversize test meets msgstream's own limit first."""
    return {
        "mq": {"type": "kafka"},
        "kafka": {"brokers": bootstrap, **kafka},
        "msgstream": {"max_message_bytes": 1_000_000, "operation_timeout_s": 20.0},
    }


def _pulsar(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    broker = request.getfixturevalue("pulsar_broker")
    return config_from_dict(
        {
            "mq": {"type": "pulsar"},
            "pulsar": {"address": broker.service_url, "admin_url": broker.admin_url},
            **LOCAL_LIMITS,
        },
        env={},
    )


def _tinylog(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    return config_from_dict(
        {"mq": {"type": "tinylog"}, "tinylog": {"store": str(tmp_path)}, **LOCAL_LIMITS}, env={}
    )


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Config]] = {
    "memory": _memory,
    "rocksmq": _rocksmq,
    "rocksmq-shared": _rocksmq_shared,
    "kafka": _kafka,
    "kafka-confluent": _kafka_confluent,
    "pulsar": _pulsar,
    "tinylog": _tinylog,
}
TEST_PLUGINS = {"tinylog": plugged_in}
"""Backends the tests define: registered for the lifetime of their harness only."""
_MARKS = {
    "kafka": [pytest.mark.kafka],
    "kafka-confluent": [pytest.mark.kafka],
    "pulsar": [pytest.mark.pulsar],
}


@pytest.fixture(params=[pytest.param(name, marks=_MARKS.get(name, [])) for name in BACKENDS])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BackendHarness]:
    with ExitStack() as plugins:
        if request.param in TEST_PLUGINS:
            plugins.enter_context(TEST_PLUGINS[request.param]())
        harness = BackendHarness(request.param, BACKENDS[request.param](request, tmp_path))
        yield harness
        await harness.close()


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the tests that type-check a program against the installed
    package (``test_typed_api.strict_mypy``): the first analyses the library and what it
    imports (numpy, pydantic, PySpark's stubs), about 10 s of CPU; the others read that
    analysis from the cache and check only their own program."""
    return tmp_path_factory.mktemp("mypy-cache")
