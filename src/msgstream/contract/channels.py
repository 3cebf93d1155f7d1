"""Channel-name rules shared by every backend, so a channel name is portable."""

from __future__ import annotations

import re

from ..errors import InvalidChannelNameError

MAX_CHANNEL_NAME = 249
_VALID = re.compile(r"[A-Za-z0-9._-]+")


def validate_channel_name(name: object) -> str:
    """Return ``name`` if it is a valid channel name, else raise ``InvalidChannelNameError``.

    The rules are Kafka's (the strictest broker): 1 to 249 characters from
    ``[A-Za-z0-9._-]``, not ``.`` or ``..``.
    """
    if not isinstance(name, str):
        raise InvalidChannelNameError(f"channel name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidChannelNameError("channel name must not be empty")
    if len(name) > MAX_CHANNEL_NAME:
        raise InvalidChannelNameError(
            f"channel name {name[:40]!r}... is {len(name)} characters; the limit is "
            f"{MAX_CHANNEL_NAME}"
        )
    if name in {".", ".."} or not _VALID.fullmatch(name):
        raise InvalidChannelNameError(
            f"channel name {name!r} is invalid: use 1-{MAX_CHANNEL_NAME} characters of "
            "[A-Za-z0-9._-], not '.' or '..'"
        )
    return name


def validate_subscription_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidChannelNameError(f"subscription name must be a non-empty str, got {name!r}")
    if len(name) > MAX_CHANNEL_NAME or "\x00" in name:
        raise InvalidChannelNameError(f"subscription name {name[:40]!r} is too long or holds NUL")
    return name
