"""Shared fixtures: every backend the conformance suite runs on, behind one harness.

A backend joins the suite by adding a harness factory to ``BACKENDS``; the tests never
name a backend. Broker backends (Kafka, Pulsar) start their real broker in their own
fixtures and, under ``CI=true``, fail rather than skip when it cannot start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from harness import BackendHarness
from msgstream import Config, config_from_dict


def _memory(tmp_path: Path) -> Config:
    return config_from_dict({"mq": {"type": "memory"}, "memory": {"name": str(tmp_path)}}, env={})


def _rocksmq(tmp_path: Path) -> Config:
    return config_from_dict(
        {"mq": {"type": "rocksmq"}, "rocksmq": {"path": str(tmp_path / "rocksmq")}}, env={}
    )


BACKENDS: dict[str, Callable[[Path], Config]] = {"memory": _memory, "rocksmq": _rocksmq}


@pytest.fixture(params=list(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BackendHarness]:
    harness = BackendHarness(request.param, BACKENDS[request.param](tmp_path))
    yield harness
    await harness.close()
