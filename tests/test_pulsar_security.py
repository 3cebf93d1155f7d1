"""Pulsar security on the session's real broker: TLS, token authentication, namespace
permissions.

The local standalone (``brokers/pulsar.py``) listens over TLS too, with a certificate from a
CA made at its first start, and enforces authorization: clients without a token and the
admin token's role are super-users, so every other Pulsar test is unaffected, while a token
minted for another role may do only what a test grants it on a namespace of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from brokers.fixtures import in_ci
from brokers.pulsar import LocalPulsar
from brokers.pulsar_tls import make_certificates
from msgstream import (
    AuthenticationError,
    BackendUnavailableError,
    DeleteMsg,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    config_from_dict,
    new_client,
)
from msgstream.contract.backend import Client
from msgstream.errors import AuthorizationError

pytestmark = pytest.mark.pulsar

EARLIEST = SubscriptionPosition.EARLIEST
LIMITED_ROLE = "msgstream-limited"
_names = iter(range(1_000_000))


def channel_name(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}-{next(_names)}"


def require_local(broker: Any, what: str) -> None:
    """Only the local standalone is set up for these tests; under CI it is the one used."""
    if isinstance(broker, LocalPulsar):
        if what == "tls" and broker.tls_service_url is None:
            pytest.fail(f"the test broker has no TLS listener: {broker.tls_problem}")
        return
    message = f"{type(broker).__name__} is not the test suite's own broker: no {what} setup"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def client(*, operation_timeout_s: float = 20.0, **pulsar: Any) -> Client:
    return new_client(
        config_from_dict(
            {
                "mq": {"type": "pulsar"},
                "pulsar": pulsar,
                "msgstream": {"operation_timeout_s": operation_timeout_s},
            },
            env={},
        )
    )


def tls_client(broker: Any, **pulsar: Any) -> Client:
    """A client of the broker's TLS listeners (binary protocol and admin API)."""
    return client(address=broker.tls_service_url, admin_url=broker.tls_admin_url, **pulsar)


def delete_msg(i: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i], hash_keys=[0]
    )


# ------------------------------------------------------------------------------------ TLS


async def test_produce_and_consume_through_msgstream_over_tls(pulsar_broker: Any) -> None:
    require_local(pulsar_broker, "tls")
    channel = channel_name("tls")
    trusted = {"tls_trust_certs_file": str(pulsar_broker.ca_cert)}
    async with (
        # With a token too: the credentials check shakes hands over TLS as well.
        MsgStream(
            tls_client(pulsar_broker, auth_token=pulsar_broker.valid_token, **trusted)
        ) as producer,
        MsgStream(tls_client(pulsar_broker, **trusted)) as consumer,
    ):
        assert producer.client.service_url.startswith("pulsar+ssl://")  # type: ignore[attr-defined]
        await producer.as_producer([channel])
        await consumer.as_consumer([channel], "tls-sub", EARLIEST)
        sent = await producer.produce(MsgPack.of(*(delete_msg(i) for i in range(1, 6))))
        received: list[int] = []
        while len(received) < 5:
            pack = await asyncio.wait_for(anext(consumer), 20)
            received.extend(m.msg_id for m in pack.msgs)
        assert received == [1, 2, 3, 4, 5]
        assert len(sent[channel]) == 5
        # The admin API is reached over HTTPS with the same CA.
        assert await consumer.client.get_latest_msg_id(channel) == sent[channel][-1]


async def test_a_client_that_does_not_trust_the_ca_gets_a_clear_error(
    pulsar_broker: Any, tmp_path: Path
) -> None:
    require_local(pulsar_broker, "tls")
    channel = channel_name("untrusted")
    stranger = make_certificates(tmp_path / "other-ca")  # a CA that did not sign the broker
    # A long deadline: the error must come from the refused handshake, not from a timeout.
    untrusted = tls_client(
        pulsar_broker, tls_trust_certs_file=str(stranger.ca_cert), operation_timeout_s=60.0
    )
    hint = "TLS certificate is not trusted: set pulsar.tls_trust_certs_file"
    with pytest.raises(BackendUnavailableError, match=hint) as producing:
        await untrusted.create_producer(channel)
    assert "creating a producer on channel" in str(producing.value)
    with pytest.raises(BackendUnavailableError, match=hint):
        await untrusted.subscribe(channel, "sub", EARLIEST)
    with pytest.raises(BackendUnavailableError, match=f"pulsar admin at https://.*{hint}"):
        await untrusted.get_latest_msg_id(channel)
    await untrusted.close()


async def test_wrong_token_over_tls_is_an_authentication_error(pulsar_broker: Any) -> None:
    require_local(pulsar_broker, "tls")
    bad = tls_client(
        pulsar_broker,
        tls_trust_certs_file=str(pulsar_broker.ca_cert),
        auth_token=pulsar_broker.forged_token(),
        operation_timeout_s=60.0,
    )
    with pytest.raises(AuthenticationError, match=r"refused the token .*authentication failed"):
        await bad.create_producer(channel_name("tls-auth"))
    await bad.close()


# -------------------------------------------------------------------------- authorization


def _admin(broker: Any, method: str, path: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{broker.admin_url}/admin/v2{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


@pytest.fixture(scope="module")
def namespaces(pulsar_broker: Any) -> dict[str, str]:
    """Two namespaces where ``LIMITED_ROLE`` may only consume, or only produce."""
    require_local(pulsar_broker, "authorization")
    stamp = time.monotonic_ns()
    found = {}
    for permission in ("consume", "produce"):
        namespace = f"{permission}-only-{stamp}"
        _admin(pulsar_broker, "PUT", f"/namespaces/public/{namespace}")
        _admin(
            pulsar_broker,
            "POST",
            f"/namespaces/public/{namespace}/permissions/{LIMITED_ROLE}",
            [permission],
        )
        found[permission] = namespace
    return found


def limited_client(broker: Any, namespace: str) -> Client:
    token = broker.role_token(LIMITED_ROLE)
    assert token is not None
    return client(
        address=broker.service_url,
        admin_url=broker.admin_url,
        namespace=namespace,
        auth_token=token,
        operation_timeout_s=60.0,
    )


def admin_client(broker: Any, namespace: str) -> Client:
    return client(address=broker.service_url, admin_url=broker.admin_url, namespace=namespace)


async def test_producing_without_the_produce_permission_is_refused_as_write(
    pulsar_broker: Any, namespaces: dict[str, str]
) -> None:
    namespace = namespaces["consume"]
    channel = channel_name("no-write")
    async with (
        MsgStream(admin_client(pulsar_broker, namespace)) as owner,
        MsgStream(limited_client(pulsar_broker, namespace)) as limited,
    ):
        await owner.as_producer([channel])
        await owner.produce(MsgPack.of(delete_msg(1)))
        with pytest.raises(AuthorizationError) as refused:
            await limited.as_producer([channel])
        assert (refused.value.channel, refused.value.operation) == (channel, "write")
        assert str(refused.value).startswith(f"not authorized to write channel {channel!r}: ")
        assert "not authorized to Produce" in str(refused.value)  # the broker's reason
        assert limited.producer_channels == []
        # The permission it has works: the same role reads what the owner wrote.
        await limited.as_consumer([channel], "reader", EARLIEST)
        pack = await asyncio.wait_for(anext(limited), 20)
        assert [m.msg_id for m in pack.msgs] == [1]


async def test_consuming_without_the_consume_permission_is_refused_as_read(
    pulsar_broker: Any, namespaces: dict[str, str]
) -> None:
    namespace = namespaces["produce"]
    channel = channel_name("no-read")
    async with MsgStream(limited_client(pulsar_broker, namespace)) as limited:
        # The permission it has works: it may write ...
        await limited.as_producer([channel])
        sent = await limited.produce(MsgPack.of(delete_msg(1)))
        assert len(sent[channel]) == 1
        # ... but not subscribe, nor read the channel's position through the admin API.
        with pytest.raises(AuthorizationError) as refused:
            await limited.as_consumer([channel], "reader", EARLIEST)
        assert (refused.value.channel, refused.value.operation) == (channel, "read")
        assert str(refused.value).startswith(f"not authorized to read channel {channel!r}: ")
        assert f"subscribing 'reader' to channel {channel!r}" in str(refused.value)
        assert limited.consumer_channels == []
        with pytest.raises(AuthorizationError) as peeking:
            await limited.client.get_latest_msg_id(channel)
        assert (peeking.value.channel, peeking.value.operation) == (channel, "read")


async def test_a_role_with_no_permission_is_refused_both_ways(
    pulsar_broker: Any, namespaces: dict[str, str]
) -> None:
    other = pulsar_broker.role_token("msgstream-nobody")
    assert other is not None
    channel = channel_name("nobody")
    nobody = client(
        address=pulsar_broker.service_url,
        admin_url=pulsar_broker.admin_url,
        namespace=namespaces["produce"],
        auth_token=other,
        operation_timeout_s=60.0,
    )
    with pytest.raises(AuthorizationError, match=f"not authorized to write channel {channel!r}"):
        await nobody.create_producer(channel)
    with pytest.raises(AuthorizationError, match=f"not authorized to read channel {channel!r}"):
        await nobody.subscribe(channel, "sub", EARLIEST)
    await nobody.close()
