"""Build clients and streams from configuration; caller code never names a broker.

Backends are imported lazily by name, so importing msgstream never imports a broker
library, and a backend whose extra is not installed fails only when it is chosen.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, cast, runtime_checkable

from .backend import Client
from .config import Config, load_config, resolve_backend
from .errors import BackendUnavailableError, ConfigError
from .stream import MsgStream
from .ttstream import TtMsgStream

BACKEND_MODULES = {
    "rocksmq": "msgstream.backends.rocksmq",
    "memory": "msgstream.backends.memory",
    "kafka": "msgstream.backends.kafka",
    "pulsar": "msgstream.backends.pulsar",
}
EXTRAS = {"kafka": "kafka", "pulsar": "pulsar"}


class _BackendModule(Protocol):
    def new_client(self, config: Config) -> Client: ...


@runtime_checkable
class _InspectableBackend(Protocol):
    """A backend with its own way to open a client for looking only (see
    :func:`new_inspection_client`)."""

    def new_inspection_client(self, config: Config) -> Client: ...


def _backend_module(config: Config) -> _BackendModule:
    backend = resolve_backend(config)
    module_name = BACKEND_MODULES.get(backend)
    if module_name is None:
        raise ConfigError("mq.type", f"unknown backend {backend!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BackendUnavailableError(
                f"backend {backend!r} is not implemented in this version of msgstream"
            ) from None
        extra = EXTRAS.get(backend)
        hint = f"; install it with: pip install 'msgstream[{extra}]'" if extra else ""
        raise BackendUnavailableError(
            f"backend {backend!r} needs the module {exc.name!r}, which is not installed{hint}"
        ) from exc
    return cast(_BackendModule, module)


def new_client(config: Config | None = None) -> Client:
    """A client of the backend the configuration selects (see ``mq.type``)."""
    config = config or load_config()
    return _backend_module(config).new_client(config)


def new_inspection_client(config: Config) -> Client:
    """A client for looking at what exists (``msgstream inspect``), never making anything.

    A backend can open one its own way by defining ``new_inspection_client`` (the embedded
    store: never created, and opened read-only while another process writes it); any
    other backend's is its ordinary client.
    """
    module = _backend_module(config)
    if isinstance(module, _InspectableBackend):
        return module.new_inspection_client(config)
    return module.new_client(config)


def _stream_options(config: Config) -> dict[str, Any]:
    section = config.msgstream
    return {
        "receive_buffer_size": section.receive_buffer_size,
        "receive_buffer_bytes": section.receive_buffer_bytes,
        "max_message_bytes": section.max_message_bytes,
    }


class MsgStreamFactory:
    """Makes streams from one configuration: ``factory.new_msgstream()``."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or load_config()

    @property
    def backend(self) -> str:
        return resolve_backend(self.config)

    def new_client(self) -> Client:
        return new_client(self.config)

    def new_msgstream(self, **options: Any) -> MsgStream:
        return MsgStream(self.new_client(), **{**_stream_options(self.config), **options})

    def new_ttmsgstream(self, **options: Any) -> TtMsgStream:
        section = self.config.msgstream
        defaults = {
            **_stream_options(self.config),
            "late_policy": section.late_policy,
            "channel_buffer_size": section.tt_channel_buffer_size,
            "channel_buffer_bytes": section.tt_channel_buffer_bytes,
            "pursuit_lag_s": section.pursuit_lag_s,
            "pursuit_buffer_size_bytes": section.pursuit_buffer_size_bytes,
            "pursuit_buffer_time_s": section.pursuit_buffer_time_s,
        }
        return TtMsgStream(self.new_client(), **{**defaults, **options})


def new_msgstream(config: Config | None = None, **options: Any) -> MsgStream:
    return MsgStreamFactory(config).new_msgstream(**options)


def new_ttmsgstream(config: Config | None = None, **options: Any) -> TtMsgStream:
    return MsgStreamFactory(config).new_ttmsgstream(**options)
