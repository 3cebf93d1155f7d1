"""The Pulsar backend's part in ``msgstream bench``: its raw baseline, ``pulsar.asyncio``.

A ``pulsar.asyncio`` client and one producer per channel with the settings msgstream's
client uses (``client_kwargs``, ``producer_kwargs``: batching, pending-send window,
authentication, TLS), sending the same encoded bytes to topics of its own: ``send`` per
message, a pack's messages sent together and awaited together.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Sequence
from typing import Any

import anyio
import pulsar
import pulsar.asyncio

from msgstream.bench.targets import BenchPlugin, Target, package_version, redacted
from msgstream.configuration.config import Config
from msgstream.wire.codec import encode
from msgstream.wire.messages import TsMsg

from .client import close_library_client
from .settings import (
    PulsarConfig,
    admin_token,
    admin_url,
    client_kwargs,
    producer_kwargs,
    service_url,
    tls_context,
    topic_name,
)


class RawPulsarAsyncio(Target):
    label = "raw pulsar.asyncio"

    def __init__(self, config: Config) -> None:
        self.section = config.section(PulsarConfig)
        self.shared = config.msgstream
        self.pulsar: Any = None
        self.producers: list[Any] = []
        self.channels: list[str] = []

    async def open(self, channels: Sequence[str]) -> None:
        self.channels = [f"{channel}-raw" for channel in channels]
        self.pulsar = pulsar.asyncio.Client(
            service_url(self.section), **client_kwargs(self.section, self.shared)
        )
        kwargs = producer_kwargs(self.section, self.shared)
        for channel in self.channels:
            topic = topic_name(self.section, channel)
            self.producers.append(await self.pulsar.create_producer(topic, **kwargs))

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return [encode(msg) for msg in msgs]

    async def send(self, channel: int, prepared: Any) -> None:
        producer = self.producers[channel]
        if len(prepared) == 1:
            await producer.send(prepared[0])
            return
        await asyncio.gather(*(producer.send(p) for p in prepared))

    async def close(self) -> None:
        if self.pulsar is not None:
            client, self.pulsar = self.pulsar, None
            self.producers = []
            await close_library_client(client, self.shared.operation_timeout_s)

    def client_settings(self) -> dict[str, Any]:
        settings = producer_kwargs(self.section, self.shared)
        return {k: v for k, v in settings.items() if isinstance(v, str | int | float | bool)}

    def client(self) -> dict[str, Any]:
        return {
            "library": f"pulsar-client {package_version('pulsar-client')}",
            "settings": redacted(self.client_settings(), self.section),
        }


def _broker_version(section: PulsarConfig, timeout_s: float) -> str:
    request = urllib.request.Request(f"{admin_url(section)}/admin/v2/brokers/version")
    token = admin_token(section)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = tls_context(section) if request.full_url.startswith("https://") else None
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as reply:
        return str(reply.read().decode("utf-8", "replace")).strip().strip('"')


async def broker_info(config: Config) -> dict[str, Any]:
    """The service URL and the version the broker's admin API reports."""
    section = config.section(PulsarConfig)
    info: dict[str, Any] = {"broker": "Apache Pulsar", "address": service_url(section)}
    timeout = min(5.0, config.msgstream.operation_timeout_s)
    info["version"] = await anyio.to_thread.run_sync(_broker_version, section, timeout)
    return info


BENCH = BenchPlugin(raw_target=RawPulsarAsyncio, broker_info=broker_info)
