"""Options shared by the bridge's entry points: configuration, channels, schema, frame.

:func:`bridge_config` builds a msgstream :class:`~msgstream.Config` from an optional YAML
file plus dotted-key overrides (``rocksmq.path``, ``kafka.brokers``, ...), with the
backend and store path made explicit so that other processes open the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from msgstream.configuration.config import Config, load_config
from msgstream.contract.channels import validate_channel_name
from msgstream.errors import InvalidChannelNameError
from msgstream.wire.schema import CollectionSchema

from ..errors import OptionError
from .clients import resolved_config


def bridge_config(
    path: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """The YAML file at ``path`` (else ``$MSGSTREAM_CONFIG``, else defaults) with
    ``MSGSTREAM_*`` variables, then ``overrides`` (dotted keys; string values are read as
    YAML scalars, so ``"true"`` is a bool, except a secret key's: see
    :func:`~msgstream.configuration.config.text_value`). Errors name the key."""
    return resolved_config(load_config(path, env).with_overrides(overrides or {}))


def parse_channels(value: str | Sequence[str], option: str = "channels") -> tuple[str, ...]:
    """Channel names from a comma-separated string or a sequence; at least one, no repeats."""
    names = [c.strip() for c in value.split(",")] if isinstance(value, str) else list(value)
    names = [c for c in names if c]
    if not names:
        raise OptionError(option, "at least one channel is needed")
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise OptionError(option, f"channels listed more than once: {twice}")
    for name in names:
        try:
            validate_channel_name(name)
        except InvalidChannelNameError as exc:
            raise OptionError(option, str(exc)) from None
    return tuple(names)


def parse_schema(
    value: str | Mapping[str, Any], option: str = "collectionSchema"
) -> CollectionSchema:
    """A collection schema from ``CollectionSchema.to_dict()`` data or its JSON text."""
    try:
        data = orjson.loads(value) if isinstance(value, str) else value
        if not isinstance(data, Mapping):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        return CollectionSchema.from_dict(dict(data))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise OptionError(option, f"not a collection schema: {exc}") from None


def positive_int(value: str | int, option: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise OptionError(option, f"expected an integer, got {value!r}") from None
    if number < 1:
        raise OptionError(option, f"expected an integer >= 1, got {number}")
    return number
