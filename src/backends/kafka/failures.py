"""Turn aiokafka's exceptions into msgstream's typed errors, naming the channel and broker.

This is the Kafka backend's one table of failures: every call to the broker goes through
:func:`broker_call` or :func:`translate`, and a broker error code in a response goes through
:func:`refusal_of_code`.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka import errors as kafka_errors

from msgstream.errors import (
    AuthenticationError,
    AuthorizationError,
    MsgStreamError,
)

from ..broker_errors import BrokerErrors, Failure

AUTH_ERRORS: tuple[type[BaseException], ...] = (
    kafka_errors.SaslAuthenticationFailed,
    kafka_errors.AuthenticationFailedError,
    kafka_errors.AuthenticationMethodNotSupported,
    kafka_errors.UnsupportedSaslMechanismError,
    kafka_errors.IllegalSaslStateError,
)

AUTHORIZATION_ERRORS: Mapping[type[kafka_errors.KafkaError], str] = {
    kafka_errors.TopicAuthorizationFailedError: "topic",
    kafka_errors.GroupAuthorizationFailedError: "consumer group",
    kafka_errors.ClusterAuthorizationFailedError: "cluster",
    kafka_errors.TransactionalIdAuthorizationFailed: "transactional id",
    kafka_errors.DelegationTokenAuthorizationFailed: "delegation token",
}
"""The broker's "not authorized" answers (ACLs), and the kind of resource each one names.
None of them is retriable: aiokafka fails the call on the first such answer."""

ANY_CHANNEL = "*"
"""The channel an :class:`AuthorizationError` names when the refused call concerned no
single channel (listing topics or consumer groups)."""


def _refused_resource(exc: BaseException) -> str | None:
    for kind, resource in AUTHORIZATION_ERRORS.items():
        if isinstance(exc, kind):
            return resource
    return None


def _table(exc: BaseException, failure: Failure) -> MsgStreamError | None:
    """Kafka's table: which aiokafka exception means what."""
    if failure.during_call and isinstance(exc, kafka_errors.UnknownTopicOrPartitionError):
        return failure.unavailable("unknown topic or partition")
    resource = _refused_resource(exc)
    if resource is not None:
        return _refusal(exc, resource, failure)
    if isinstance(exc, AUTH_ERRORS) or "authentication" in str(exc).lower():
        return AuthenticationError(f"{failure.prefix}: authentication failed: {exc}")
    if isinstance(exc, TimeoutError | kafka_errors.KafkaTimeoutError):
        return failure.unavailable(f"timed out ({exc or 'no answer'})")
    return None


def _refusal(exc: BaseException, resource: str, failure: Failure) -> AuthorizationError:
    return failure.refused(
        f"the broker's ACLs deny it on the {resource} ({type(exc).__name__}: {exc})",
        default_channel=ANY_CHANNEL,
    )


ERRORS = BrokerErrors(
    "kafka", (kafka_errors.KafkaError, OSError), _table, "msgstream.operation_timeout_s"
)
"""Kafka's error mapping (the mechanism is :mod:`msgstream.backends.broker_errors`)."""


translate = ERRORS.translate
"""``translate(exc, what, brokers, channel=None, operation="use")``: the msgstream error for
``exc`` raised while doing ``what``. ``channel`` and ``operation`` ("write", "read",
"create", ...) are what an ACL refusal names: the broker refused ``operation`` on
``channel`` (or on its consumer group)."""

broker_call = ERRORS.call
"""``async with broker_call(what, brokers, deadline_s, channel=None, operation="use")``:
run the body within ``deadline_s``; raise a msgstream error on any broker failure."""


def refusal_of_code(
    code: int, detail: str, what: str, brokers: str, channel: str, operation: str
) -> AuthorizationError | None:
    """The error for a broker error ``code`` found in a response (not raised by aiokafka)
    when it is an authorization refusal; None for any other code."""
    kind = kafka_errors.for_code(code)
    resource = AUTHORIZATION_ERRORS.get(kind)
    if resource is None:
        return None
    failure = Failure("kafka", brokers, what, channel, operation, during_call=False)
    return _refusal(kind(detail) if detail else kind(), resource, failure)
