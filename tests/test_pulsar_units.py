"""Pulsar backend pieces that need no broker: ids, settings, the handshake codec, tokens."""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
import hmac
import json
import logging
import ssl
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest

pytest.importorskip("pulsar")

from brokers.pulsar import from_environment, mint_token
from msgstream import (
    AuthenticationError,
    BackendUnavailableError,
    ConfigError,
    ForeignMessageIdError,
    InvalidPositionError,
)
from msgstream.backends.pulsar.admin import _is_refused_permission
from msgstream.backends.pulsar.failures import is_untrusted_certificate, translate
from msgstream.backends.pulsar.handshake import connect_frame, refusal
from msgstream.backends.pulsar.ids import EARLIEST, PulsarMessageID
from msgstream.backends.pulsar.settings import PulsarConfig, admin_url, service_url
from msgstream.errors import AuthorizationError


def test_ids_round_trip_through_pulsars_serialisation_and_order() -> None:
    import pulsar

    ids = [PulsarMessageID(7, 3), PulsarMessageID(7, 4), PulsarMessageID(8, 0, 2)]
    for msg_id in ids:
        assert PulsarMessageID.parse(msg_id.to_bytes()) == msg_id
        native = pulsar.MessageId.deserialize(msg_id.to_bytes())
        assert (native.ledger_id(), native.entry_id()) == (msg_id.ledger, msg_id.entry)
    assert EARLIEST < ids[0] < ids[1] < ids[2]
    assert len({*ids, PulsarMessageID(7, 3)}) == 3


@pytest.mark.parametrize(("tag", "owner"), [(b"m", "memory"), (b"r", "rocksmq"), (b"k", "kafka")])
def test_other_backends_ids_are_foreign(tag: bytes, owner: str) -> None:
    with pytest.raises(ForeignMessageIdError, match=f"backend {owner!r}"):
        PulsarMessageID.parse(tag + (1).to_bytes(8, "big"))


@pytest.mark.parametrize("data", [b"", b"\x00not-an-id", b"garbage", b"\x08"])
def test_garbage_is_not_an_id(data: bytes) -> None:
    with pytest.raises(InvalidPositionError, match="is not a pulsar id"):
        PulsarMessageID.parse(data)


def test_service_and_admin_urls() -> None:
    assert service_url(PulsarConfig(address="broker", port=6651)) == "pulsar://broker:6651"
    assert service_url(PulsarConfig(address="pulsar://b:1/")) == "pulsar://b:1"
    assert admin_url(PulsarConfig(address="pulsar://b:1,c:2")) == "http://b:8080"
    assert admin_url(PulsarConfig(address="pulsar+ssl://b:6651")) == "https://b:8443"
    assert admin_url(PulsarConfig(address="b", admin_url="http://a:9/")) == "http://a:9"
    with pytest.raises(ConfigError) as info:
        service_url(PulsarConfig(address="kafka://b:1"))
    assert info.value.key == "pulsar.address"


def test_token_and_plugin_exclude_each_other() -> None:
    with pytest.raises(ConfigError) as info:
        PulsarConfig(auth_token="t", auth_plugin="org.example.Auth")
    assert info.value.key == "pulsar.auth_token, pulsar.auth_plugin"
    with pytest.raises(ConfigError) as info:
        PulsarConfig(auth_params="x")
    assert info.value.key == "pulsar.auth_params, pulsar.auth_plugin"


def test_handshake_frames() -> None:
    frame = connect_frame("tok")
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert b"token" in frame and b"tok" in frame
    # BaseCommand{type=ERROR, error={request_id=0, error=AuthenticationError, message="no"}}
    error = b"\x08\x00\x10\x03\x1a\x02no"
    assert refusal(b"\x08\x0e\x72" + bytes([len(error)]) + error) == "no"
    assert refusal(b"\x08\x03") is None  # CONNECTED


def test_minted_tokens_are_hs256_jwts() -> None:
    key = b"k" * 32
    header, payload, signature = mint_token(key, "me").split(".")
    assert json.loads(base64.urlsafe_b64decode(payload + "==")) == {"sub": "me"}
    expected = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "==") == expected


def test_broker_from_environment() -> None:
    assert from_environment({}) is None
    found = from_environment({"MSGSTREAM_TEST_PULSAR": "pulsar://h:6650"})
    assert found is not None
    assert (found.service_url, found.admin_url, found.valid_token) == (
        "pulsar://h:6650",
        "http://h:8080",
        None,
    )


def test_refusals_and_untrusted_certificates_are_named() -> None:
    import pulsar
    import pulsar.asyncio

    where = "pulsar://b:6650"
    refused = pulsar.asyncio.PulsarException(
        pulsar.Result.AuthorizationError, "Client is not authorized to Produce"
    )
    error = translate(refused, "creating a producer", where, channel="ch", operation="write")
    assert isinstance(error, AuthorizationError)
    assert (error.channel, error.operation) == ("ch", "write")
    assert str(error) == (
        "not authorized to write channel 'ch': pulsar at pulsar://b:6650: creating a producer: "
        "Client is not authorized to Produce"
    )
    # Without a channel to name, a refusal stays an authentication failure.
    assert type(translate(refused, "x", where)) is AuthenticationError
    # The synchronous API's exception class for the same result.
    sync = pulsar.exceptions.AuthorizationError("no lookup")
    error = translate(sync, "subscribing", where, channel="ch", operation="read")
    assert isinstance(error, AuthorizationError)
    assert str(error).endswith("subscribing: no lookup")

    untrusted = pulsar.asyncio.PulsarException(
        pulsar.Result.ConnectError, "Handshake failed: certificate verify failed (SSL routines)"
    )
    error = translate(untrusted, "creating a producer", where)
    assert type(error) is BackendUnavailableError
    assert "set pulsar.tls_trust_certs_file to the CA (PEM) that signed it" in str(error)
    refused_connection = pulsar.asyncio.PulsarException(pulsar.Result.ConnectError, "refused")
    assert "tls_trust_certs_file" not in str(translate(refused_connection, "x", where))
    wrapped = urllib.error.URLError(
        ssl.SSLCertVerificationError(
            1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
        )
    )
    assert is_untrusted_certificate(wrapped)
    assert not is_untrusted_certificate(urllib.error.URLError(ConnectionRefusedError()))

    assert _is_refused_permission(401, "Unauthorized to validateTopicOperation for operation")
    assert _is_refused_permission(403, "Forbidden")
    assert not _is_refused_permission(401, "Authentication required")
    assert not _is_refused_permission(404, "Topic not found")


def test_library_log_lines_keep_their_level_source_and_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from msgstream.backends.pulsar.library_log import forward

    name = "msgstream.backends.pulsar.library"
    lines = [
        b"2026-11-25 10:00:00.123 INFO  [1403] ProducerImpl:222 | Created producer\n",
        b"2026-11-25 10:00:00.124 WARN  [1403] ClientConnection:9 | two\n",
        b"lines, the second without a prefix\n",
        b"2026-11-25 10:00:00.125 ERROR [77] ClientImpl:275 | bad \xff byte\n",
        b"2026-11-25 10:00:00.126 DEBUG [77] HandlerBase:1 | detail\n",
    ]
    with caplog.at_level(logging.DEBUG, logger=name):
        level = logging.ERROR
        for line in lines:
            level = forward(line, level)
    assert [(r.name, r.levelname, r.getMessage(), r.backend) for r in caplog.records] == [
        (name, "INFO", "ProducerImpl:222 | Created producer", "pulsar"),
        (name, "WARNING", "ClientConnection:9 | two", "pulsar"),
        (name, "WARNING", "lines, the second without a prefix", "pulsar"),
        (name, "ERROR", "ClientImpl:275 | bad \ufffd byte", "pulsar"),
        (name, "DEBUG", "HandlerBase:1 | detail", "pulsar"),
    ]


async def test_a_creation_given_up_on_runs_on_and_what_it_makes_is_closed() -> None:
    from msgstream.backends.pulsar.client import uncancelled

    release = asyncio.Event()
    closed = asyncio.Event()
    events: list[str] = []

    class Made:
        async def close(self) -> None:
            events.append("closed")
            closed.set()

    async def creation() -> Made:
        await release.wait()
        events.append("created")
        return Made()

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(uncancelled(creation()), 0.05)
    assert events == []  # still running: the deadline did not reach it
    release.set()
    await asyncio.wait_for(closed.wait(), 5)
    assert events == ["created", "closed"]


async def test_a_creation_given_up_on_that_fails_later_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from msgstream.backends.pulsar.client import uncancelled

    release = asyncio.Event()

    async def creation() -> None:
        await release.wait()
        raise RuntimeError("the library's own timeout")

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(uncancelled(creation()), 0.05)
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


FORK_PROGRAM = """
import os, threading
from msgstream.backends.pulsar import library_log

library_log.library_logger()
pid = os.fork()
if pid == 0:
    names = [t.name for t in threading.enumerate() if t.is_alive()]
    os._exit(names.count("msgstream-pulsar-library-log"))
_, status = os.waitpid(pid, 0)
print("child readers", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_gets_its_own_reader_of_the_library_pipe(tmp_path: Path) -> None:
    """The child inherits the pipe the library writes into, not the reader thread: one is
    started for it (else the child's library would block on a full pipe)."""
    script = tmp_path / "fork.py"
    script.write_text(FORK_PROGRAM)
    done = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "child readers 1\n"
