"""Kafka security on the real session broker: TLS, SASL/SCRAM-SHA-512 and ACLs.

The local launcher (tests/brokers/kafka.py) gives the one session broker SSL and SASL_SSL
listeners with a certificate from a CA it makes, SCRAM-SHA-512 users created when its
storage is formatted, and KRaft's ``StandardAuthorizer`` (everything stays open unless an
ACL says otherwise, so the other tests are unaffected). The ACL tests add ALLOW-everyone
and DENY-one-user rules under the :data:`ACL_PREFIX` topic and group prefix only.

Against an external broker the parts it does not offer are skipped (see
``brokers.kafka.security_from_environment``); against the local launcher they must run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka.conn import create_conn
from aiokafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest

from brokers.kafka import KafkaSecurity, LocalKafka
from conftest import kafka_config
from msgstream import (
    AuthenticationError,
    AuthorizationError,
    BackendUnavailableError,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    config_from_dict,
    new_client,
)
from msgstream.wire.messages import DeleteMsg

pytestmark = pytest.mark.kafka

EARLIEST = SubscriptionPosition.EARLIEST
DEADLINE_S = 20.0
"""msgstream.operation_timeout_s of every client here. A refusal must come from the
broker's answer: an error that waited for this deadline says "no answer within"."""

ACL_PREFIX = "sec-acl-"
"""Topics and consumer groups under this prefix carry the ACL tests' rules."""

# Kafka's wire codes for ACL bindings (org.apache.kafka.common.acl / resource).
_TOPIC, _GROUP = 2, 3
_PREFIXED = 4
_ALL, _READ, _WRITE = 2, 3, 4
_DENY, _ALLOW = 2, 3

ACL_RULES = [
    (_TOPIC, "User:*", _ALL, _ALLOW),
    (_GROUP, "User:*", _ALL, _ALLOW),
    (_TOPIC, "User:nowrite", _WRITE, _DENY),
    (_TOPIC, "User:noread", _READ, _DENY),
    (_GROUP, "User:nogroup", _READ, _DENY),
]
"""(resource type, principal, operation, permission) for resources named ACL_PREFIX*."""


def name(label: str) -> str:
    return f"{ACL_PREFIX}{label}-{uuid.uuid4().hex[:10]}"


def delete_msg(i: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i], hash_keys=[0]
    )


_engine = {"client": "aiokafka"}


@pytest.fixture(autouse=True, params=["aiokafka", "confluent"])
def engine(request: pytest.FixtureRequest) -> str:
    """The engine (``kafka.client``) of every stream the test makes: the SASL and TLS keys
    map to each library's own names."""
    _engine["client"] = request.param
    return str(request.param)


def stream_for(bootstrap: str, **kafka: Any) -> MsgStream:
    kafka.setdefault("client", _engine["client"])
    options = kafka_config(bootstrap, **kafka)
    options["msgstream"]["operation_timeout_s"] = DEADLINE_S
    return MsgStream(new_client(config_from_dict(options, env={})))


def scram(security: KafkaSecurity, user: str, **kafka: Any) -> dict[str, Any]:
    """Options for ``user`` with SCRAM-SHA-512 (over SASL_PLAINTEXT unless overridden)."""
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": user,
        "sasl_password": security.scram_users[user],
        **kafka,
    }


@pytest.fixture
def security(kafka_broker: Any) -> KafkaSecurity:
    found = getattr(kafka_broker, "security", None)
    return found if isinstance(found, KafkaSecurity) else KafkaSecurity()


def require(kafka_broker: Any, present: object, what: str) -> None:
    """Skip when an external broker lacks ``what``; the local launcher always has it."""
    if present:
        return
    message = f"this Kafka broker offers no {what}"
    if isinstance(kafka_broker, LocalKafka):
        pytest.fail(f"the local launcher should offer {what}", pytrace=False)
    pytest.skip(message)


async def round_trip(producer: MsgStream, consumer: MsgStream, count: int) -> list[int]:
    """Produce ``count`` messages to a new channel and read them back; their msg_ids."""
    channel, subname = name("rt"), name("rt-sub")
    await producer.as_producer([channel])
    for i in range(count):
        await producer.produce(MsgPack.of(delete_msg(i)))
    await consumer.as_consumer([channel], subname, EARLIEST)
    received: list[int] = []
    async for pack in consumer:
        received.extend(m.msg_id for m in pack.msgs)
        await consumer.ack(pack)
        if len(received) == count:
            break
    return received


# ---------------------------------------------------------------------------------- TLS


async def test_ssl_round_trip_with_the_ca(kafka_broker: Any, security: KafkaSecurity) -> None:
    require(kafka_broker, security.ssl_bootstrap, "SSL listener")
    assert security.ssl_bootstrap is not None
    tls = {"security_protocol": "SSL", "ssl_cafile": security.ca_file}
    async with (
        stream_for(security.ssl_bootstrap, **tls) as producer,
        stream_for(security.ssl_bootstrap, **tls) as consumer,
    ):
        assert await round_trip(producer, consumer, 5) == [0, 1, 2, 3, 4]


async def test_ssl_client_that_does_not_trust_the_ca_is_refused(
    kafka_broker: Any, security: KafkaSecurity
) -> None:
    require(kafka_broker, security.ssl_bootstrap, "SSL listener")
    assert security.ssl_bootstrap is not None
    # No kafka.ssl_cafile: the system CAs, which never signed the test CA.
    async with stream_for(security.ssl_bootstrap, security_protocol="SSL") as stream:
        with pytest.raises(AuthenticationError) as raised:
            await stream.as_producer([name("untrusted")])
    message = str(raised.value)
    assert message.startswith(f"kafka at {security.ssl_bootstrap}: connecting: ")
    assert "the broker's TLS certificate failed verification" in message
    assert "kafka.ssl_cafile" in message


async def test_tls_client_on_a_plaintext_port_names_the_handshake(kafka_broker: Any) -> None:
    """Not an authentication failure (the configuration, not the credentials, is wrong)."""
    async with stream_for(kafka_broker.bootstrap, security_protocol="SSL") as stream:
        with pytest.raises(BackendUnavailableError) as raised:
            await stream.as_producer([name("wrong-port")])
    assert not isinstance(raised.value, AuthenticationError)
    assert str(raised.value).startswith(f"kafka at {kafka_broker.bootstrap}: connecting: ")
    assert "TLS handshake failed" in str(raised.value)
    assert "is this a SSL listener?" in str(raised.value)


# ------------------------------------------------------------------------------- SCRAM


async def test_scram_sha_512_round_trip(kafka_broker: Any, security: KafkaSecurity) -> None:
    require(kafka_broker, security.scram_bootstrap, "SCRAM-SHA-512 listener")
    assert security.scram_bootstrap is not None
    user = "carol" if "carol" in security.scram_users else next(iter(security.scram_users))
    async with (
        stream_for(security.scram_bootstrap, **scram(security, user)) as producer,
        stream_for(security.scram_bootstrap, **scram(security, user)) as consumer,
    ):
        assert await round_trip(producer, consumer, 3) == [0, 1, 2]


async def test_scram_sha_512_over_tls_round_trip(
    kafka_broker: Any, security: KafkaSecurity
) -> None:
    require(kafka_broker, security.sasl_ssl_bootstrap and security.scram_users, "SASL_SSL")
    assert security.sasl_ssl_bootstrap is not None
    user = "carol" if "carol" in security.scram_users else next(iter(security.scram_users))
    options = scram(security, user, security_protocol="SASL_SSL", ssl_cafile=security.ca_file)
    async with (
        stream_for(security.sasl_ssl_bootstrap, **options) as producer,
        stream_for(security.sasl_ssl_bootstrap, **options) as consumer,
    ):
        assert await round_trip(producer, consumer, 2) == [0, 1]


async def test_scram_wrong_password_is_an_authentication_error(
    kafka_broker: Any, security: KafkaSecurity
) -> None:
    require(kafka_broker, security.scram_bootstrap, "SCRAM-SHA-512 listener")
    assert security.scram_bootstrap is not None
    user = next(iter(security.scram_users))
    options = scram(security, user, sasl_password=security.scram_users[user] + "-wrong")
    async with stream_for(security.scram_bootstrap, **options) as stream:
        with pytest.raises(AuthenticationError) as raised:
            await stream.as_producer([name("bad-password")])
    message = str(raised.value)
    assert message.startswith(f"kafka at {security.scram_bootstrap}: connecting: ")
    assert f"authentication failed for user {user!r} (mechanism SCRAM-SHA-512)" in message


# -------------------------------------------------------------------------------- ACLs


async def _install_acls(bootstrap: str) -> None:
    """Create :data:`ACL_RULES` (idempotent) as the super user, and wait until the broker
    enforces them (it answers DescribeAcls from the same view its authorizer uses)."""
    host, _, port = bootstrap.rpartition(":")
    conn = await create_conn(host, int(port), request_timeout_ms=int(DEADLINE_S * 1000))
    try:
        for resource, principal, operation, permission in ACL_RULES:
            request = CreateAclsRequest(
                resource, ACL_PREFIX, _PREFIXED, principal, "*", operation, permission
            )
            response = await conn.send(request)
            codes = [code for code, _ in response.creation_responses]
            assert codes == [0], f"creating ACL {principal} on {ACL_PREFIX}*: {response}"
        wanted = {(r, p, o, perm) for r, p, o, perm in ACL_RULES}
        deadline = time.monotonic() + DEADLINE_S
        while True:
            # resource ANY, pattern ANY, principal/host any, operation ANY, permission ANY
            answer = await conn.send(DescribeAclsRequest(1, None, 1, None, None, 1, 1))
            seen = {
                (resource_type, principal, operation, permission)
                for resource_type, resource_name, _pattern, acls in answer.resources
                if resource_name == ACL_PREFIX
                for principal, _host, operation, permission in acls
            }
            if wanted <= seen or time.monotonic() > deadline:
                assert wanted <= seen, f"ACLs not visible: {answer}"
                return
            await asyncio.sleep(0.05)
    finally:
        conn.close()


@pytest.fixture
async def acls(kafka_broker: Any, security: KafkaSecurity) -> KafkaSecurity:
    require(kafka_broker, security.acls, "StandardAuthorizer set up for the ACL tests")
    await _install_acls(kafka_broker.bootstrap)
    return security


def client_options(security: KafkaSecurity, user: str) -> Mapping[str, Any]:
    assert security.scram_bootstrap is not None
    return {"bootstrap": security.scram_bootstrap, **scram(security, user)}


def stream_as(security: KafkaSecurity, user: str) -> MsgStream:
    options = dict(client_options(security, user))
    return stream_for(options.pop("bootstrap"), **options)


async def test_write_denied_by_an_acl_is_an_authorization_error(acls: KafkaSecurity) -> None:
    channel = name("nowrite")
    async with stream_as(acls, "nowrite") as denied, stream_as(acls, "carol") as allowed:
        await denied.as_producer([channel])  # creating and describing the topic is allowed
        for pack in (MsgPack.of(delete_msg(1)), MsgPack(msgs=[delete_msg(2), delete_msg(3)])):
            with pytest.raises(AuthorizationError) as raised:
                await denied.produce(pack)
            assert raised.value.channel == channel
            assert raised.value.operation == "write"
            assert str(raised.value).startswith(
                f"not authorized to write channel {channel!r}: kafka at {acls.scram_bootstrap}: "
                f"sending to channel {channel!r}: the broker's ACLs deny it on the topic "
                "(TopicAuthorizationFailedError: "
            )
        # The refusal wrote nothing: the first message anyone stores is carol's, at 0.
        await allowed.as_producer([channel])
        ids = await allowed.produce(MsgPack.of(delete_msg(4)))
        assert [i.offset for i in ids[channel]] == [0]  # type: ignore[attr-defined]


async def test_read_denied_by_an_acl_fails_the_subscription(acls: KafkaSecurity) -> None:
    channel, subname = name("noread"), name("noread-sub")
    async with stream_as(acls, "carol") as writer, stream_as(acls, "noread") as denied:
        await writer.as_producer([channel])
        await writer.produce(MsgPack.of(delete_msg(1)))
        with pytest.raises(AuthorizationError) as raised:
            await denied.as_consumer([channel], subname, EARLIEST)
    assert raised.value.channel == channel
    assert raised.value.operation == "read"
    assert str(raised.value).startswith(f"not authorized to read channel {channel!r}: ")
    assert "the broker's ACLs deny it on the topic (TopicAuthorizationFailedError" in str(
        raised.value
    )


async def test_read_denied_by_an_acl_fails_receiving(acls: KafkaSecurity) -> None:
    """A subscription carol started (committed offset) that noread resumes: subscribing
    needs no READ, the first fetch does."""
    channel, subname = name("noread-rx"), name("noread-rx-sub")
    async with stream_as(acls, "carol") as carol:
        await carol.as_producer([channel])
        await carol.produce(MsgPack.of(delete_msg(1)))
        await carol.as_consumer([channel], subname, EARLIEST)
    async with stream_as(acls, "noread") as denied:
        await denied.as_consumer([channel], subname, EARLIEST)
        with pytest.raises(AuthorizationError) as raised:
            await anext(aiter(denied))
    assert raised.value.channel == channel
    assert raised.value.operation == "read"
    assert str(raised.value).startswith(
        f"not authorized to read channel {channel!r}: kafka at {acls.scram_bootstrap}: "
        f"reading channel {channel!r} (subscription {subname!r}): the broker's ACLs deny it "
        "on the topic (TopicAuthorizationFailedError"
    )


async def test_group_read_denied_by_an_acl_fails_the_subscription(acls: KafkaSecurity) -> None:
    channel, subname = name("nogroup"), name("nogroup-sub")
    async with stream_as(acls, "carol") as writer, stream_as(acls, "nogroup") as denied:
        await writer.as_producer([channel])
        await writer.produce(MsgPack.of(delete_msg(1)))
        with pytest.raises(AuthorizationError) as raised:
            await denied.as_consumer([channel], subname, EARLIEST)
    assert raised.value.channel == channel
    assert raised.value.operation == "read"
    message = str(raised.value)
    assert message.startswith(f"not authorized to read channel {channel!r}: ")
    assert f"subscription {subname!r}" in message
    assert "the broker's ACLs deny it on the consumer group (GroupAuthorizationFailedError" in (
        message
    )
    assert subname in message.rpartition("GroupAuthorizationFailedError")[2]


# ------------------------------------------------------------------- without a broker


def test_every_authorization_refusal_code_maps_to_an_authorization_error() -> None:
    """The one table: each of Kafka's "not authorized" codes (29, 30, 31, 53, 65) names
    the channel, the operation and the refused resource; other codes are not refusals."""
    from msgstream.backends.kafka.failures import refusal_of_code

    resources = {29: "topic", 30: "consumer group", 31: "cluster", 53: "transactional id"}
    resources[65] = "delegation token"
    for code, resource in resources.items():
        refused = refusal_of_code(code, "", "creating topic 't'", "h:1", "t", "create")
        assert refused is not None
        assert (refused.channel, refused.operation) == ("t", "create")
        assert str(refused).startswith(
            f"not authorized to create channel 't': kafka at h:1: creating topic 't': "
            f"the broker's ACLs deny it on the {resource} ("
        )
    for code in (0, 3, 36, 58):
        assert refusal_of_code(code, "", "creating topic 't'", "h:1", "t", "create") is None


def test_a_refusal_concerning_no_single_channel_names_any_channel() -> None:
    from aiokafka.errors import ClusterAuthorizationFailedError

    from msgstream.backends.kafka.failures import translate

    refused = translate(ClusterAuthorizationFailedError(), "listing topics", "h:1")
    assert isinstance(refused, AuthorizationError)
    assert (refused.channel, refused.operation) == ("*", "use")


def test_security_of_an_external_broker_comes_from_the_environment() -> None:
    from brokers.kafka import from_environment

    bare = from_environment({"MSGSTREAM_TEST_KAFKA": "k:9092"})
    assert bare is not None and bare.security == KafkaSecurity()
    users = "nowrite:a,noread:b,nogroup:c"
    full = from_environment(
        {
            "MSGSTREAM_TEST_KAFKA": "k:9092",
            "MSGSTREAM_TEST_KAFKA_SASL": "k:9094",
            "MSGSTREAM_TEST_KAFKA_SSL": "k:9093",
            "MSGSTREAM_TEST_KAFKA_SASL_SSL": "k:9095",
            "MSGSTREAM_TEST_KAFKA_CAFILE": "/ca.pem",
            "MSGSTREAM_TEST_KAFKA_SCRAM_USERS": users,
            "MSGSTREAM_TEST_KAFKA_ACLS": "1",
        }
    )
    assert full is not None
    assert full.security == KafkaSecurity(
        ssl_bootstrap="k:9093",
        sasl_ssl_bootstrap="k:9095",
        ca_file="/ca.pem",
        scram_bootstrap="k:9094",
        scram_users={"nowrite": "a", "noread": "b", "nogroup": "c"},
        acls=True,
    )
    # TLS without the CA to verify it, and ACLs without their users, are not offered.
    partial = from_environment(
        {
            "MSGSTREAM_TEST_KAFKA": "k:9092",
            "MSGSTREAM_TEST_KAFKA_SASL": "k:9094",
            "MSGSTREAM_TEST_KAFKA_SSL": "k:9093",
            "MSGSTREAM_TEST_KAFKA_SCRAM_USERS": "carol:x",
            "MSGSTREAM_TEST_KAFKA_ACLS": "1",
        }
    )
    assert partial is not None
    assert (partial.security.ssl_bootstrap, partial.security.acls) == (None, False)
    assert partial.security.scram_bootstrap == "k:9094"
