"""What a benchmark sends through: msgstream itself, or a backend's raw client.

A :class:`Target` opens producers on the run's channels, *prepares* a pack (untimed: for
msgstream the :class:`MsgPack`, for a raw client the encoded bytes, so both sides send the
same bytes and only msgstream's own work is timed) and *sends* it (timed).

Raw baselines are contributed by the backends, never named by the core: a backend
declares a factory under the ``msgstream.bench_baselines`` entry-point group, keyed by its
backend name::

    [project.entry-points."msgstream.bench_baselines"]
    mybroker = "mybroker_msgstream.bench_baseline:BENCH"

naming a :class:`BenchPlugin`: its ``raw_target`` takes the
:class:`~msgstream.configuration.config.Config` and returns a :class:`Target` that uses the broker
library directly, with the settings msgstream's own client would use; its ``broker_info`` says what
it knows of the broker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import Any

from pydantic import BaseModel

from ..configuration.config import Config, resolve_backend
from ..configuration.config_keys import MASK, secrets_of
from ..errors import MsgStreamError
from ..streams.factory import MsgStreamFactory
from ..streams.stream import MsgStream
from ..wire.messages import TsMsg
from ..wire.pack import MsgPack

BASELINE_GROUP = "msgstream.bench_baselines"


class NoBaselineError(MsgStreamError):
    """``--baseline raw`` on a backend that contributes no raw baseline."""


class Target(ABC):
    """One side of a benchmark: msgstream, or a raw client."""

    label: str
    """Shown in tables and charts: ``msgstream`` or ``raw <library>``."""

    @abstractmethod
    async def open(self, channels: Sequence[str]) -> None:
        """Create producers on ``channels`` (created on the broker if needed)."""

    @abstractmethod
    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        """What :meth:`send` takes for these messages, built before the send is due."""

    @abstractmethod
    async def send(self, channel: int, prepared: Any) -> None:
        """Send a prepared pack to channel number ``channel``; return once acknowledged."""

    @abstractmethod
    async def close(self) -> None: ...

    def due(self, intended_ns: int) -> None:
        """Called right before :meth:`send` with the send's intended time
        (``perf_counter_ns``), for targets that time more than the send itself."""
        return None

    def client(self) -> dict[str, Any]:
        """Library name and version, and the client settings that matter for latency."""
        return {}


def package_version(distribution: str) -> str:
    """The installed version of ``distribution`` ("?" if unknown)."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def redacted(settings: Mapping[str, Any], section: BaseModel) -> dict[str, Any]:
    """Settings made from ``section`` (the section itself, dumped, or a client's arguments
    built from it) fit for a report: every text holding one of the section's secrets (its
    keys typed ``SecretStr``) shown as the mask, whatever the setting is called."""
    secrets = [secret for secret in secrets_of(section) if secret]

    def shown(value: Any) -> Any:
        if isinstance(value, str) and any(secret in value for secret in secrets):
            return MASK
        return value

    return {key: shown(value) for key, value in settings.items()}


class MsgStreamTarget(Target):
    """Sends through :class:`~msgstream.streams.stream.MsgStream` on the configured backend."""

    label = "msgstream"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.backend = resolve_backend(config)
        self.stream: MsgStream | None = None

    async def open(self, channels: Sequence[str]) -> None:
        self.stream = MsgStreamFactory(self.config).new_msgstream()
        await self.stream.as_producer(list(channels))

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return MsgPack(msgs=msgs)

    async def send(self, channel: int, prepared: Any) -> None:
        assert self.stream is not None
        await self.stream.produce(prepared)

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            await stream.close()

    def client(self) -> dict[str, Any]:
        from .. import __version__

        section = getattr(self.config, self.backend)
        return {
            "library": f"msgstream {__version__}",
            "backend": self.backend,
            "settings": redacted(section.model_dump(mode="json"), section),
        }


@dataclass(frozen=True)
class BenchPlugin:
    """What a backend contributes to ``msgstream bench`` (entry point
    ``msgstream.bench_baselines``, named after the backend)."""

    raw_target: Callable[[Config], Target] | None = None
    """The raw baseline: the broker library used directly, msgstream's settings."""
    broker_info: Callable[[Config], Awaitable[dict[str, Any]]] | None = None
    """What is known of the broker (version, address) for the JSON document."""


def bench_plugin(backend: str) -> BenchPlugin | None:
    """The bench plug-in of ``backend``, if it has one."""
    for entry in entry_points(group=BASELINE_GROUP):
        if entry.name == backend:
            plugin = entry.load()
            if not isinstance(plugin, BenchPlugin):
                raise NoBaselineError(
                    f"entry point {entry.name!r} = {entry.value!r} of group {BASELINE_GROUP!r} "
                    "is not a BenchPlugin"
                )
            return plugin
    return None


def baseline_names() -> list[str]:
    """The backends that contribute a raw baseline."""
    return sorted({e.name for e in entry_points(group=BASELINE_GROUP)})


def raw_target(config: Config) -> Target:
    """The raw baseline of the configured backend (:class:`NoBaselineError` if it has none)."""
    backend = resolve_backend(config)
    plugin = bench_plugin(backend)
    if plugin is None or plugin.raw_target is None:
        have = ", ".join(baseline_names()) or "none"
        raise NoBaselineError(
            f"--baseline raw: backend {backend!r} has no raw baseline (backends with one: {have})"
        )
    return plugin.raw_target(config)


async def broker_info(config: Config) -> dict[str, Any]:
    """What the configured backend's bench plug-in knows of its broker ({} if nothing);
    never fails the run."""
    backend = resolve_backend(config)
    plugin = bench_plugin(backend)
    if plugin is None or plugin.broker_info is None:
        return {}
    try:
        return await plugin.broker_info(config)
    except Exception as exc:  # informative only
        return {"error": f"{type(exc).__name__}: {exc}"}
