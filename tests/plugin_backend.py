"""A backend defined in the tests, plugged in the way a third-party package would be.

``tinylog`` keeps its channels in process like ``memory`` (the log client over a store of
its own), under its own name, MessageID tag and config section, so the conformance suite
can run on a backend the core has never heard of.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar, Self

from pydantic import Field, model_validator

from msgstream import BackendSpec, register_backend, unregister_backend
from msgstream.backends.log_client import LogClient
from msgstream.backends.memory import MemoryStore
from msgstream.configuration.config import MsgStreamConfig
from msgstream.configuration.sections import Section
from msgstream.errors import BackendUnavailableError, ConfigError

__all__ = ["TinyLogFullError"]
"""Its public errors (a spec naming this module as ``errors`` exports them)."""


class TinyLogFullError(BackendUnavailableError):
    """The store holds ``max_channels`` channels already (never raised: the name is what
    the tests look up)."""


class TinyLogConfig(Section):
    """The tinylog backend's own section."""

    SECTION: ClassVar[str] = "tinylog"

    store: str | None = Field(default=None, description="Name of the in-process store")
    max_channels: int = Field(default=1000, description="Channels the store holds at most", ge=1)
    strict_names: bool = Field(default=False, description="Refuse channel names with upper case")

    @model_validator(mode="after")
    def _check_together(self) -> Self:
        if self.strict_names and self.store is not None and self.store != self.store.lower():
            raise ConfigError(
                "tinylog.store, tinylog.strict_names",
                "tinylog.strict_names is set but tinylog.store has upper case",
            )
        return self


class TinyLogStore(MemoryStore):
    backend_name = "tinylog"


_STORES: dict[str, TinyLogStore] = {}


def new_client(section: TinyLogConfig, shared: MsgStreamConfig) -> LogClient:
    name = section.store or "default"
    store = _STORES.setdefault(name, TinyLogStore(name))
    return LogClient(store, max_message_bytes=shared.max_message_bytes)


SPEC = BackendSpec(
    name="tinylog",
    section=TinyLogConfig,
    client_factory="plugin_backend:new_client",
    message_id_tag=b"t",
    required_keys=("store",),
)


@contextmanager
def plugged_in(spec: BackendSpec = SPEC) -> Iterator[BackendSpec]:
    """``spec`` registered for the duration of the block."""
    register_backend(spec)
    try:
        yield spec
    finally:
        unregister_backend(spec.name)
