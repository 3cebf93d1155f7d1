"""Turn the Pulsar client's failures into msgstream's typed errors, naming what and where.

The broker says ``AuthorizationError`` when a known role lacks a permission (produce,
consume, lookup) on the topic's namespace; the library reports it at once (it does not
retry it), and it becomes msgstream's :class:`AuthorizationError` naming the channel and
the operation ("write" for producing, "read" for subscribing and reading). A TLS
certificate the client does not trust is a ``ConnectError`` from the library and an
``SSLCertVerificationError`` from the admin API; both name ``pulsar.tls_trust_certs_file``.
"""

from __future__ import annotations

from msgstream.errors import (
    AuthenticationError,
    AuthorizationError,
    MsgStreamError,
)

from ..broker_errors import BrokerErrors, Failure
from .library import pulsar, pulsar_asyncio

_AUTH_RESULTS = frozenset(
    {
        pulsar.Result.AuthenticationError,
        pulsar.Result.AuthorizationError,
        pulsar.Result.ErrorGettingAuthenticationData,
    }
)
_UNTRUSTED = "certificate verify failed"
"""What OpenSSL's message says, in the library's ConnectError and in Python's ssl errors."""
UNTRUSTED_HINT = (
    "the broker's TLS certificate is not trusted: set pulsar.tls_trust_certs_file to the "
    "CA (PEM) that signed it"
)


def result_of(exc: BaseException) -> pulsar.Result | None:
    """The library's result code carried by ``exc``, if it carries one."""
    if isinstance(exc, pulsar_asyncio.PulsarException):
        return exc.error()
    if isinstance(exc, pulsar.PulsarException):
        # The synchronous API raises one subclass per result, named after it.
        found: pulsar.Result | None = getattr(pulsar.Result, type(exc).__name__, None)
        return found
    return None


def not_authorized(
    channel: str, operation: str, where: str, what: str, reason: str
) -> AuthorizationError:
    """The broker refused a permission on ``channel``: msgstream's ``AuthorizationError``."""
    failure = Failure("pulsar", where, what, channel, operation, during_call=False)
    return failure.refused(reason or "refused by the broker", default_channel=channel)


def is_untrusted_certificate(exc: BaseException) -> bool:
    """True if ``exc`` (or what it wraps) is a TLS certificate this client does not trust."""
    seen: BaseException | None = exc
    while seen is not None:
        if _UNTRUSTED in str(seen):
            return True
        seen = getattr(seen, "reason", None) if isinstance(seen, OSError) else None
        if not isinstance(seen, BaseException):
            return False
    return False


def _table(exc: BaseException, failure: Failure) -> MsgStreamError | None:
    """Pulsar's table: which library result (or Python exception) means what."""
    result = result_of(exc)
    if result == pulsar.Result.AuthorizationError and failure.channel is not None:
        reason = _library_reason(exc) or "refused by the broker"
        return failure.refused(reason, default_channel=failure.channel)
    if result in _AUTH_RESULTS:
        return AuthenticationError(f"{failure.prefix}: authentication failed ({exc})")
    if result == pulsar.Result.Timeout or isinstance(exc, TimeoutError):
        return failure.unavailable(f"timed out ({exc or 'no answer'})")
    if result == pulsar.Result.ConnectError:
        if is_untrusted_certificate(exc):
            return failure.unavailable(f"cannot connect: {UNTRUSTED_HINT} ({exc})")
        return failure.unavailable(f"cannot connect ({exc})")
    return None


ERRORS = BrokerErrors(
    "pulsar",
    (pulsar_asyncio.PulsarException, pulsar.PulsarException, OSError),
    _table,
    "msgstream.operation_timeout_s, pulsar.operation_timeout_s",
)
"""Pulsar's error mapping (the mechanism is :mod:`msgstream.backends.broker_errors`)."""


translate = ERRORS.translate
"""``translate(exc, what, where, channel=None, operation=None)``: the msgstream error for
``exc``, raised while doing ``what`` against ``where``. ``channel`` and ``operation`` name
what a refused permission refused ("write", "read"); without them a refusal is reported
as failed authentication."""

broker_call = ERRORS.call
"""``async with broker_call(what, where, deadline_s, channel=None, operation=None)``: run
the body within ``deadline_s``; raise a msgstream error on any broker failure."""


def _library_reason(exc: BaseException) -> str:
    """The broker's own words, when the library passed them on ("" when it did not)."""
    words = [a for a in getattr(exc, "args", ()) if isinstance(a, str) and a]
    return words[-1] if words else ""
