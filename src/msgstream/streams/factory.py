"""Build clients and streams from configuration; caller code never names a broker.

A backend's client factory (its spec's ``"module:function"``, see
:mod:`msgstream.configuration.plugins`) is imported when a client is made, so importing msgstream
never imports a broker library, and a backend whose extra is not installed fails only when it is
chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Unpack, cast

from ..configuration.config import (
    Config,
    MsgStreamConfig,
    load_config,
    resolve_backend,
    stream_option,
)
from ..configuration.plugins import BackendSpec, backend_spec
from ..configuration.sections import Section
from ..contract.backend import Client, ObservableClient
from ..errors import BackendUnavailableError
from ..observability.observe import default_instruments
from .stream import MsgStream, StreamOptions
from .ttstream import TtMsgStream, TtStreamOptions

ClientFactory = Callable[[Section, MsgStreamConfig], Client]
"""What a spec's ``client_factory`` names: (its own section, the shared section) -> client."""


def enable_configured(config: Config) -> None:
    """Turn on what the ``metrics`` and ``tracing`` sections enable (process-wide, as
    :func:`msgstream.observability.metrics.enable` does); nothing is imported when they are off."""
    if config.metrics.enabled:
        from ..observability import metrics

        metrics.enable()
        if config.metrics.port is not None:
            metrics.serve_once(config.metrics.port)
    if config.tracing.enabled:
        from ..observability import tracing

        tracing.enable()


def client_factory(spec: BackendSpec, target: str | None = None) -> ClientFactory:
    """Import the function ``target`` (``spec.client_factory`` by default) names; a
    missing module is a :class:`BackendUnavailableError` naming the extra that installs it."""
    module_name, _, function = (target or spec.client_factory).partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BackendUnavailableError(
                f"backend {spec.name!r} is not implemented in this version of msgstream"
            ) from None
        hint = f"; install it with: pip install 'msgstream[{spec.extra}]'" if spec.extra else ""
        raise BackendUnavailableError(
            f"backend {spec.name!r} needs the module {exc.name!r}, which is not installed{hint}"
        ) from exc
    try:
        return cast(ClientFactory, getattr(module, function))
    except AttributeError:
        raise BackendUnavailableError(
            f"backend {spec.name!r}: {module_name} has no client factory {function!r}"
        ) from None


def new_client(config: Config | None = None) -> Client:
    """A client of the backend the configuration selects (see ``mq.type``): its factory
    gets the backend's own section and the shared ``msgstream`` section."""
    config = config or load_config()
    spec = backend_spec(resolve_backend(config))
    client = client_factory(spec)(config.section(spec.section), config.msgstream)
    instruments = default_instruments()
    if instruments is not None and isinstance(client, ObservableClient):
        client.observe(instruments.store(client.backend_name))
    return client


def new_inspection_client(config: Config) -> Client:
    """A client for looking at what exists (``msgstream inspect``), never making anything.

    A backend can open one its own way by naming an ``inspection_client_factory`` in its
    spec (the embedded store: never created, and opened read-only while another process
    writes it); any other backend's is its ordinary client.
    """
    spec = backend_spec(resolve_backend(config))
    make = client_factory(spec, spec.inspection_client_factory)
    return make(config.section(spec.section), config.msgstream)


def _configured(section: MsgStreamConfig, accepted: frozenset[str]) -> dict[str, Any]:
    """The options among ``accepted`` that ``section`` sets, by option name (each key
    sets the option :func:`~msgstream.configuration.config.stream_option` names)."""
    return {
        option: getattr(section, key)
        for key in MsgStreamConfig.model_fields
        if (option := stream_option(key)) in accepted
    }


def stream_options(section: MsgStreamConfig) -> dict[str, Any]:
    """The :class:`MsgStream` options the ``msgstream`` section configures."""
    return _configured(section, StreamOptions.__optional_keys__)


def ttstream_options(section: MsgStreamConfig) -> dict[str, Any]:
    """The :class:`TtMsgStream` options the ``msgstream`` section configures: for a stream
    on a client made some other way than :func:`new_client`."""
    return _configured(section, TtStreamOptions.__optional_keys__)


class MsgStreamFactory:
    """Makes streams from one configuration: ``factory.new_msgstream()``."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or load_config()
        enable_configured(self.config)

    @property
    def backend(self) -> str:
        return resolve_backend(self.config)

    def new_client(self) -> Client:
        return new_client(self.config)

    def new_msgstream(self, **options: Unpack[StreamOptions]) -> MsgStream:
        defaults = stream_options(self.config.msgstream)
        return MsgStream(self.new_client(), **{**defaults, **options})

    def new_ttmsgstream(self, **options: Unpack[TtStreamOptions]) -> TtMsgStream:
        defaults = ttstream_options(self.config.msgstream)
        return TtMsgStream(self.new_client(), **{**defaults, **options})


def new_msgstream(config: Config | None = None, **options: Unpack[StreamOptions]) -> MsgStream:
    return MsgStreamFactory(config).new_msgstream(**options)


def new_ttmsgstream(
    config: Config | None = None, **options: Unpack[TtStreamOptions]
) -> TtMsgStream:
    return MsgStreamFactory(config).new_ttmsgstream(**options)
