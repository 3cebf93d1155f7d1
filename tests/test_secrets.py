"""Secrets in the configuration never show; they reach the broker client and nothing else.

Distinctive secrets go in through each way a configuration is read (a YAML file, the
environment, a dict) and through every error path that names a secret key, a failed
connection, the CLI at ``-vv``, metrics and traces; none of those texts may hold them.
They are the secret keys' values, the entries of the pass-through maps whose names say
secret (``kafka.confluent``'s ``sasl.password``...), and credentials written into a broker
address, which is refused.
The places that build a client must still get the real value, so each test can fail
both ways. No broker is needed: connections go to a port where nothing listens, or to a
small local stand-in that records what the client sent and refuses it.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import SecretStr

from msgstream import (
    AuthenticationError,
    BackendSpec,
    BackendUnavailableError,
    Config,
    DeleteMsg,
    MsgPack,
    config_from_dict,
    load_config,
    new_client,
    new_msgstream,
    register_backend,
    unregister_backend,
)
from msgstream.backends.kafka.bench_baseline import RawAiokafka, RawConfluent
from msgstream.backends.kafka.settings import (
    KafkaConfig,
    admin_kwargs,
    connection_kwargs,
    consumer_kwargs,
    librdkafka_consumer,
    librdkafka_producer,
    librdkafka_refusal,
    producer_kwargs,
    topic_configs,
)
from msgstream.backends.pulsar.handshake import _field
from msgstream.backends.pulsar.settings import PulsarConfig, admin_token
from msgstream.bench.common import target_config
from msgstream.bench.targets import MsgStreamTarget
from msgstream.cli.common import CliError
from msgstream.configuration.config import config_reference_markdown, env_var_name, text_value
from msgstream.configuration.config_keys import MASK, names_a_secret, reveal, revealed, secrets_of
from msgstream.configuration.sections import Section
from msgstream.errors import ConfigError

SASL = "s3cr3t-SASL-9f1c"
KEY_PASSWORD = "s3cr3t-KEYPW-41d0"
TOKEN = "tok-PULSAR-77ab"
PARAMS_TOKEN = "tok-PARAMS-5e2d"
NUMBER = 7391046628
"""A secret given with the wrong type (a YAML password that reads as a number)."""
AIO_PRODUCER = "s3cr3t-AIOPROD-b2e7"
AIO_CONSUMER = "s3cr3t-AIOCONS-3c58"
RD_PASSWORD = "s3cr3t-RDPW-c9a4"
RD_KEYSTORE = "s3cr3t-KEYSTORE-1a7e"
RD_KEY_PEM = "s3cr3t-KEYPEM-0f3e"
RD_CLIENT_SECRET = "s3cr3t-OIDC-d45b"
RD_KEY_PASSWORD = "s3cr3t-RDKEYPW-7e21"
TOPIC_KEY = "s3cr3t-TOPICKEY-5a90"
"""Secrets in the pass-through maps, each under a name that says so."""
URL_PASSWORD = "s3cr3t-URLPW-8a3f"
URL_TOKEN = "tok-URL-61fe"
"""Credentials written into a broker address."""
SECRETS = (
    *(SASL, KEY_PASSWORD, TOKEN, PARAMS_TOKEN, str(NUMBER)),
    *(AIO_PRODUCER, AIO_CONSUMER, RD_PASSWORD, RD_KEYSTORE, RD_KEY_PEM, RD_CLIENT_SECRET),
    *(RD_KEY_PASSWORD, TOPIC_KEY, URL_PASSWORD, URL_TOKEN),
)

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
NOWHERE = "127.0.0.1:9"
"""Never reached: configurations only loaded, not connected."""


def assert_hidden(*shown: object) -> None:
    """None of :data:`SECRETS` is in any of ``shown`` (text as is, anything else by repr)."""
    for item in shown:
        text = item if isinstance(item, str) else repr(item)
        for secret in SECRETS:
            assert secret not in text, f"secret {secret!r} shown in: {text[:400]}"


def error_texts(exc: BaseException) -> list[str]:
    """Everything an error can show: its text, its repr, its formatted traceback, and the
    text of every exception chained to it (a suppressed context too)."""
    texts = ["".join(traceback.format_exception(exc))]
    seen: BaseException | None = exc
    while seen is not None:
        texts += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    return texts


def secret_data() -> dict[str, dict[str, Any]]:
    """Every secret key set: Kafka over SASL_SSL with an encrypted client key, Pulsar with
    a token."""
    return {
        "mq": {"type": "kafka"},
        "kafka": {
            "brokers": NOWHERE,
            "security_protocol": "SASL_SSL",
            "sasl_username": "alice",
            "sasl_password": SASL,
            "ssl_certfile": "client.pem",
            "ssl_keyfile": "client.key",
            "ssl_key_password": KEY_PASSWORD,
        },
        "pulsar": {"address": f"pulsar://{NOWHERE}", "auth_token": TOKEN},
    }


def plugin_data() -> dict[str, dict[str, Any]]:
    """Pulsar's plug-in parameters, which carry a token here."""
    return {
        "mq": {"type": "pulsar"},
        "pulsar": {
            "address": f"pulsar://{NOWHERE}",
            "auth_plugin": TOKEN_PLUGIN,
            "auth_params": f"token:{PARAMS_TOKEN}",
        },
    }


def pass_through() -> dict[str, dict[str, Any]]:
    """A secret in each of Kafka's pass-through maps, beside a setting that is none."""
    return {
        "producer": {"sasl_plain_password": AIO_PRODUCER, "max_batch_size": 65536},
        "consumer": {"sasl_plain_password": AIO_CONSUMER, "check_crcs": True},
        "confluent": {
            "sasl.password": RD_PASSWORD,
            "ssl.keystore.password": RD_KEYSTORE,
            "ssl.key.pem": RD_KEY_PEM,
            "sasl.oauthbearer.client.secret": RD_CLIENT_SECRET,
            "linger.ms": 5,
        },
        "topic_config": {"retention.ms": 604800000, "vendor.api_key": TOPIC_KEY},
    }


def pass_through_data() -> dict[str, dict[str, Any]]:
    return {"mq": {"type": "kafka"}, "kafka": {"brokers": NOWHERE, **pass_through()}}


def load(source: str, data: dict[str, dict[str, Any]], tmp_path: Path) -> Config:
    """``data`` read the way ``source`` says: a dict, a YAML file or environment variables
    (a mapping as JSON)."""
    if source == "dict":
        return config_from_dict(data, env={})
    if source == "yaml":
        path = tmp_path / "msgstream.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return load_config(path, env={})
    env = {
        env_var_name(f"{section}.{key}"): json.dumps(value)
        if isinstance(value, dict)
        else str(value)
        for section, keys in data.items()
        for key, value in keys.items()
    }
    return load_config(env=env)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port where nothing listens: bound (so no one else takes it), never listening,
    so a connection is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record at DEBUG and above, msgstream's and the libraries' (the Pulsar
    library's own lines at DEBUG too)."""
    from msgstream.backends.pulsar.library_log import LIBRARY_LOG

    level = LIBRARY_LOG.level
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="msgstream")
    LIBRARY_LOG.setLevel(logging.DEBUG)
    yield caplog
    LIBRARY_LOG.setLevel(level)


def assert_no_record_shows_a_secret(caplog: pytest.LogCaptureFixture) -> None:
    assert_hidden(caplog.text)
    for record in caplog.records:
        assert_hidden(record.getMessage(), record.__dict__)


# ------------------------------------------------------------------------------ loading


def assert_shows_no_secret(cfg: Config) -> None:
    """Nothing a configuration or its sections show holds a secret."""
    dumped = cfg.to_dict()
    assert_hidden(
        repr(cfg),
        str(cfg),
        f"{cfg}",
        dumped,
        json.dumps(dumped),
        yaml.safe_dump(dumped),
        cfg.model_dump_json(),
        cfg.model_dump(),
    )
    for section in cfg.sections().values():
        assert_hidden(repr(section), str(section), section.model_dump(), section.model_dump_json())


@pytest.mark.parametrize("source", ["dict", "yaml", "env"])
def test_a_loaded_config_shows_no_secret_and_keeps_each(source: str, tmp_path: Path) -> None:
    config = load(source, secret_data(), tmp_path)
    plugin = load(source, plugin_data(), tmp_path)
    assert reveal(config.kafka.sasl_password) == SASL
    assert reveal(config.kafka.ssl_key_password) == KEY_PASSWORD
    assert reveal(config.pulsar.auth_token) == TOKEN
    assert reveal(plugin.pulsar.auth_params) == f"token:{PARAMS_TOKEN}"
    assert_shows_no_secret(config)
    assert_shows_no_secret(plugin)
    dumped = config.to_dict()
    assert (dumped["kafka"]["sasl_password"], dumped["kafka"]["ssl_key_password"]) == (MASK, MASK)
    assert dumped["pulsar"]["auth_token"] == MASK
    assert plugin.to_dict()["pulsar"]["auth_params"] == MASK
    assert dumped["kafka"]["sasl_username"] == "alice"  # only secrets are masked


@pytest.mark.parametrize("source", ["dict", "yaml", "env"])
def test_a_pass_through_secret_is_one_from_the_start_and_keeps_its_value(
    source: str, tmp_path: Path, records: pytest.LogCaptureFixture
) -> None:
    config = load(source, pass_through_data(), tmp_path)
    given = pass_through()
    kafka = config.section(KafkaConfig)
    maps = {name: getattr(kafka, name) for name in given}
    assert {name: revealed(values) for name, values in maps.items()} == given
    secret = {
        name: sorted(k for k, v in values.items() if isinstance(v, SecretStr))
        for name, values in maps.items()
    }
    assert secret == {
        "producer": ["sasl_plain_password"],
        "consumer": ["sasl_plain_password"],
        "confluent": [
            "sasl.oauthbearer.client.secret",
            "sasl.password",
            "ssl.key.pem",
            "ssl.keystore.password",
        ],
        "topic_config": ["vendor.api_key"],
    }
    assert_shows_no_secret(config)
    dumped = config.to_dict()["kafka"]
    assert dumped["producer"] == {"sasl_plain_password": MASK, "max_batch_size": 65536}
    assert dumped["consumer"] == {"sasl_plain_password": MASK, "check_crcs": True}
    assert dumped["confluent"] == {
        "sasl.password": MASK,
        "ssl.keystore.password": MASK,
        "ssl.key.pem": MASK,
        "sasl.oauthbearer.client.secret": MASK,
        "linger.ms": 5,  # only what is named a secret is masked
    }
    assert dumped["topic_config"] == {"retention.ms": 604800000, "vendor.api_key": MASK}
    assert_no_record_shows_a_secret(records)


@pytest.mark.parametrize(
    "name",
    [
        "sasl_plain_password",  # aiokafka
        "sasl.password",  # librdkafka, from here on
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.jaas.config",  # Java's; refused by librdkafka, but it holds a password
        "vendor.api_key",  # any other map
        "auth.token",
        "aws.credentials",
        "clientSecret",
        "private-key",
        "SASL.PASSWORD",
    ],
)
def test_a_pass_through_entry_named_so_is_secret(name: str) -> None:
    assert names_a_secret(name)


@pytest.mark.parametrize(
    "name",
    [
        "sasl_plain_username",
        "sasl.username",
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.certificate.pem",
        "ssl.ca.pem",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.extensions",
        "max_batch_size",
        "linger.ms",
        "retention.ms",
        "tokens",
        "secretary",
    ],
)
def test_a_pass_through_entry_not_named_so_is_shown(name: str) -> None:
    assert not names_a_secret(name)


def test_every_secret_key_is_typed_secret_and_documented_so() -> None:
    from msgstream.configuration.config import config_keys

    secret = sorted(key.dotted for key in config_keys() if key.secret)
    assert secret == [
        "kafka.sasl_password",
        "kafka.ssl_key_password",
        "pulsar.auth_params",
        "pulsar.auth_token",
    ]
    reference = config_reference_markdown()
    for key in secret:
        assert f"| `{key}` | `{env_var_name(key)}` | secret str or null | `null` |" in reference
    assert "| `kafka.sasl_username` | `MSGSTREAM_KAFKA_SASL_USERNAME` | str or null |" in reference


class VaultLogConfig(Section):
    """A plug-in backend's section declaring a new secret key: its type says it all."""

    SECTION: ClassVar[str] = "vaultlog"

    store: str | None = None
    """Name of the in-process store"""

    api_key: SecretStr | None = None
    """Key of the store's API"""


def test_a_new_secret_key_needs_nothing_but_its_type() -> None:
    spec = BackendSpec(
        name="vaultlog",
        section=VaultLogConfig,
        client_factory="plugin_backend:new_client",
        message_id_tag=b"v",
        required_keys=("store",),
    )
    register_backend(spec)
    try:
        env = {"MSGSTREAM_VAULTLOG_STORE": "v", "MSGSTREAM_VAULTLOG_API_KEY": TOKEN}
        config = load_config(env={"MSGSTREAM_MQ_TYPE": "vaultlog", **env})
        assert reveal(config.section(VaultLogConfig).api_key) == TOKEN
        assert config.to_dict()["vaultlog"] == {"store": "v", "api_key": MASK}
        assert_hidden(repr(config), str(config), config.to_dict())
        assert_hidden(MsgStreamTarget(config).client())
        assert "| `MSGSTREAM_VAULTLOG_API_KEY` | secret str or null |" in (
            config_reference_markdown()
        )
        with pytest.raises(ConfigError) as exc:
            config_from_dict({"vaultlog": {"api_key": NUMBER}}, env={})
        assert exc.value.key == "vaultlog.api_key"
        assert_hidden(*error_texts(exc.value))
    finally:
        unregister_backend("vaultlog")


def test_a_secret_from_the_environment_is_its_text_as_is() -> None:
    """Environment values are converted by the key's type: a secret's is never parsed, so
    digits stay text and spaces stay."""
    env = {
        "MSGSTREAM_KAFKA_SASL_USERNAME": "alice",
        "MSGSTREAM_KAFKA_SASL_PASSWORD": " 0123 ",
    }
    assert reveal(load_config(env=env).kafka.sasl_password) == " 0123 "


def test_a_shown_config_cannot_be_fed_back_as_secrets(tmp_path: Path) -> None:
    config = load("dict", secret_data(), tmp_path)
    with pytest.raises(ConfigError) as exc:
        config_from_dict(config.to_dict(), env={})
    assert exc.value.key == "kafka.sasl_password"
    assert "give the secret itself" in exc.value.problem
    changed = config.with_values({"kafka": {"acks": "1"}})
    assert changed.kafka.acks == "1"
    assert reveal(changed.kafka.sasl_password) == SASL
    assert reveal(changed.pulsar.auth_token) == TOKEN
    passing = load("dict", pass_through_data(), tmp_path)
    with pytest.raises(ConfigError) as exc:
        config_from_dict(passing.to_dict(), env={})
    assert exc.value.key == "kafka.topic_config.vendor.api_key"  # the first map holding one
    assert "give the secret itself" in exc.value.problem
    changed = passing.with_values({"kafka": {"acks": "1"}})
    assert revealed(changed.kafka.confluent) == pass_through()["confluent"]
    assert revealed(changed.kafka.producer) == pass_through()["producer"]


def test_overrides_given_as_text_keep_a_secret_as_is() -> None:
    """``--set`` and Spark options are read as YAML, except a secret: ``0123`` stays text,
    and text that is no YAML raises no parser error echoing it."""
    from msgstream.bridge_spark.data.options import bridge_config

    assert text_value("kafka.linger_ms", "5") == 5
    assert text_value("kafka.sasl_password", "0123") == "0123"
    assert text_value("kafka.sasl_password", "[" + SASL) == "[" + SASL
    overrides = {
        "mq.type": "memory",
        "kafka.sasl_username": "alice",
        "kafka.sasl_password": "{" + SASL,
    }
    config = bridge_config(None, overrides, env={})
    assert reveal(config.kafka.sasl_password) == "{" + SASL


# ------------------------------------------------------------------ where a client is built


def test_kafka_client_arguments_carry_the_real_secrets(tmp_path: Path) -> None:
    data = secret_data()
    data["kafka"]["security_protocol"] = "SASL_PLAINTEXT"  # no TLS files to load
    section = load("dict", data, tmp_path).section(KafkaConfig)
    for kwargs in (
        producer_kwargs(section),
        consumer_kwargs(section, "g"),
        admin_kwargs(section),
    ):
        assert kwargs["sasl_plain_password"] == SASL
    tls = load("dict", secret_data(), tmp_path).section(KafkaConfig)
    for conf in (librdkafka_producer(tls), librdkafka_consumer(tls, "g")):
        assert (conf["sasl.password"], conf["ssl.key.password"]) == (SASL, KEY_PASSWORD)


def test_the_pass_through_secrets_reach_the_clients_as_given(tmp_path: Path) -> None:
    section = load("dict", pass_through_data(), tmp_path).section(KafkaConfig)
    given = pass_through()
    producer, consumer = producer_kwargs(section), consumer_kwargs(section, "g")
    assert (producer["sasl_plain_password"], producer["max_batch_size"]) == (AIO_PRODUCER, 65536)
    assert (consumer["sasl_plain_password"], consumer["check_crcs"]) == (AIO_CONSUMER, True)
    for conf in (librdkafka_producer(section), librdkafka_consumer(section, "g")):
        assert {name: conf[name] for name in given["confluent"]} == given["confluent"]
    assert topic_configs(section) == {"retention.ms": "604800000", "vendor.api_key": TOPIC_KEY}


def encrypted_key(tmp_path: Path, password: str) -> tuple[Path, Path]:
    """A self-signed certificate and its private key, encrypted with ``password``."""
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt"),
            *("ec_paramgen_curve:prime256v1", "-keyout", str(key), "-out", str(cert)),
            *("-days", "1", "-subj", "/CN=msgstream-test", "-passout", f"pass:{password}"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_the_key_password_opens_the_key_and_a_wrong_one_is_not_shown(tmp_path: Path) -> None:
    cert, key = encrypted_key(tmp_path, KEY_PASSWORD)

    def section(password: str) -> KafkaConfig:
        return KafkaConfig(
            brokers=NOWHERE,
            security_protocol="SSL",
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            ssl_key_password=password,  # type: ignore[arg-type]  # validated into a secret
        )

    assert isinstance(connection_kwargs(section(KEY_PASSWORD))["ssl_context"], ssl.SSLContext)
    with pytest.raises(ConfigError) as exc:
        connection_kwargs(section(SASL))  # the wrong password: the key does not open
    assert exc.value.key == "kafka.ssl_cafile, kafka.ssl_certfile, kafka.ssl_keyfile"
    assert_hidden(*error_texts(exc.value))


def test_librdkafka_checks_kafka_confluent_with_the_real_secrets(tmp_path: Path) -> None:
    """At load, librdkafka builds the TLS context ``kafka.confluent`` describes: it opens
    the key given as text (a secret) with the password given beside it (another); the
    mask would open nothing. With a wrong password it refuses, showing neither."""
    cert, key = encrypted_key(tmp_path, RD_KEY_PASSWORD)
    pem = key.read_text(encoding="utf-8")

    def confluent(password: str) -> dict[str, Any]:
        return {
            "security.protocol": "ssl",
            "ssl.certificate.pem": cert.read_text(encoding="utf-8"),
            "ssl.key.pem": pem,
            "ssl.key.password": password,
        }

    section = KafkaConfig(brokers=NOWHERE, confluent=confluent(RD_KEY_PASSWORD))
    assert isinstance(section.confluent["ssl.key.pem"], SecretStr)
    assert librdkafka_producer(section)["ssl.key.pem"] == pem
    with pytest.raises(ConfigError) as exc:
        KafkaConfig(brokers=NOWHERE, confluent=confluent(SASL))
    assert exc.value.key == "kafka.confluent"
    assert exc.value.problem.startswith("rejected by librdkafka: Failed to create producer: ")
    assert "wrong password" in exc.value.problem
    texts = error_texts(exc.value)
    assert_hidden(*texts)
    assert not [text for text in texts if pem.splitlines()[1] in text]


def test_what_librdkafka_echoes_of_a_secret_is_masked(tmp_path: Path) -> None:
    """librdkafka quotes some values back (its OAUTHBEARER token error quotes
    ``sasl.oauthbearer.config``): its refusals, at load and when a client starts, show its
    words with every secret of the section masked, declared or passed through."""
    from confluent_kafka import KafkaError, KafkaException

    data = secret_data()
    data["kafka"].update(security_protocol="SASL_PLAINTEXT", **pass_through())
    section = load("dict", data, tmp_path).section(KafkaConfig)
    said = f"Unrecognized sasl.oauthbearer.config beginning at: {RD_PASSWORD} for {SASL}"
    refusal = KafkaException(KafkaError(KafkaError._INVALID_ARG, said))
    assert librdkafka_refusal(refusal, secrets_of(section)) == (
        f"Unrecognized sasl.oauthbearer.config beginning at: {MASK} for {MASK}"
    )
    assert librdkafka_refusal(ValueError(f" {RD_KEY_PEM} "), secrets_of(section)) == MASK


def test_pulsar_admin_token_is_the_real_one(tmp_path: Path) -> None:
    assert admin_token(load("dict", secret_data(), tmp_path).section(PulsarConfig)) == TOKEN
    plugin = load("dict", plugin_data(), tmp_path).section(PulsarConfig)
    assert admin_token(plugin) == PARAMS_TOKEN


# ---------------------------------------------------------------------------- error paths

PULSAR_URL_CREDENTIALS = (
    "holds credentials (before '@'): an address is shown in errors and logs, and the client "
    "reads none from it; give them in pulsar.auth_token, or pulsar.auth_plugin with "
    "pulsar.auth_params"
)
KAFKA_ADDRESS_CREDENTIALS = (
    "holds credentials (before '@'): an address is shown in errors and logs, and the client "
    "reads none from it; give them in kafka.sasl_username and kafka.sasl_password"
)

ERROR_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "password without user name",
        {"kafka": {"sasl_password": SASL}},
        "kafka.sasl_username, kafka.sasl_password",
        "kafka.sasl_password is set but kafka.sasl_username is not; set both or neither",
    ),
    (
        "SASL without user name",
        {"kafka": {"security_protocol": "SASL_SSL", "ssl_key_password": KEY_PASSWORD}},
        "kafka.sasl_username, kafka.sasl_password",
        "required when kafka.security_protocol is SASL_SSL",
    ),
    (
        "token plus plugin",
        {"pulsar": {"auth_token": TOKEN, "auth_plugin": TOKEN_PLUGIN}},
        "pulsar.auth_token, pulsar.auth_plugin",
        "both are set; use a token or an authentication plugin, not both",
    ),
    (
        "plugin parameters without plugin",
        {"pulsar": {"auth_params": f"token:{PARAMS_TOKEN}"}},
        "pulsar.auth_params, pulsar.auth_plugin",
        "pulsar.auth_params is set but pulsar.auth_plugin is not",
    ),
    (
        "a number for a password",
        {"kafka": {"sasl_username": "alice", "sasl_password": NUMBER}},
        "kafka.sasl_password",
        f"expected a string, got {MASK} (int)",
    ),
    (
        "a list for a token",
        {"pulsar": {"auth_token": [TOKEN]}},
        "pulsar.auth_token",
        f"expected a string, got {MASK} (list)",
    ),
    (
        "a mapping for plugin parameters",
        {"pulsar": {"auth_plugin": TOKEN_PLUGIN, "auth_params": {"token": PARAMS_TOKEN}}},
        "pulsar.auth_params",
        f"expected a string, got {MASK} (dict)",
    ),
    (
        "a misspelt secret key",
        {"kafka": {"sasl_pasword": SASL}},
        "kafka.sasl_pasword",
        "unknown key; did you mean 'kafka.sasl_password'?",
    ),
    (
        "a section that is no mapping",
        {"kafka": ["sasl_password", SASL]},
        "kafka",
        f"expected a mapping of keys, got {MASK} (list)",
    ),
    (
        "a misspelt section holding a secret",
        {"pulsr": {"auth_token": TOKEN}},
        "pulsr",
        "unknown key; did you mean 'pulsar'?",
    ),
    (
        "a number for a pass-through secret",
        {"kafka": {"confluent": {"linger.ms": 5, "sasl.password": NUMBER}}},
        "kafka.confluent.sasl.password",
        f"expected a string (its name says it is a secret), got {MASK} (int)",
    ),
    (
        "a list for a pass-through secret",
        {"kafka": {"producer": {"sasl_plain_password": [AIO_PRODUCER]}}},
        "kafka.producer.sasl_plain_password",
        f"expected a string, number or boolean, got {MASK} (list)",
    ),
    (
        "the mask for a pass-through secret",
        {"kafka": {"confluent": {"ssl.key.pem": MASK, "sasl.password": RD_PASSWORD}}},
        "kafka.confluent.ssl.key.pem",
        f"{MASK!r} is what a shown configuration has in place of a secret (to_dict() masks "
        "them): give the secret itself",
    ),
    (
        "a pass-through map that is no mapping",
        {"kafka": {"consumer": f"sasl_plain_password={AIO_CONSUMER}"}},
        "kafka.consumer",
        f"expected a mapping, got {MASK} (str)",
    ),
    (
        "a property librdkafka refuses beside secrets",
        {"kafka": {"confluent": {"sasl.password": RD_PASSWORD, "no.such.property": TOPIC_KEY}}},
        "kafka.confluent.no.such.property",
        'rejected by librdkafka: No such configuration property: "no.such.property"',
    ),
    (
        "a password in pulsar.address",
        {"pulsar": {"address": f"pulsar://alice:{URL_PASSWORD}@127.0.0.1:6650"}},
        "pulsar.address",
        PULSAR_URL_CREDENTIALS,
    ),
    (
        "a token in pulsar.address",
        {"pulsar": {"address": f"pulsar+ssl://{URL_TOKEN}@10.0.0.1:6651,10.0.0.2:6651"}},
        "pulsar.address",
        PULSAR_URL_CREDENTIALS,
    ),
    (
        "a password in pulsar.admin_url",
        {"pulsar": {"admin_url": f"https://alice:{URL_PASSWORD}@127.0.0.1:8443"}},
        "pulsar.admin_url",
        PULSAR_URL_CREDENTIALS,
    ),
    (
        "a password in kafka.brokers",
        {"kafka": {"brokers": f"127.0.0.1:9092,alice:{URL_PASSWORD}@127.0.0.1:9093"}},
        "kafka.brokers",
        KAFKA_ADDRESS_CREDENTIALS,
    ),
]


@pytest.mark.parametrize("source", ["dict", "yaml"])
@pytest.mark.parametrize(
    ("data", "key", "problem"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_a_config_error_names_the_key_and_shows_no_secret(
    source: str,
    data: dict[str, Any],
    key: str,
    problem: str,
    tmp_path: Path,
    records: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(ConfigError) as exc:
        load(source, data, tmp_path)
    assert (exc.value.key, exc.value.problem) == (key, problem)
    assert_hidden(*error_texts(exc.value))
    assert_no_record_shows_a_secret(records)


def test_a_document_that_is_no_mapping_shows_no_secret() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict([SASL], env={})  # type: ignore[arg-type]
    assert exc.value.problem == f"expected a mapping of sections, got {MASK} (list)"
    assert_hidden(*error_texts(exc.value))


def test_a_yaml_error_on_a_secret_line_shows_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "msgstream.yaml"
    path.write_text(f"kafka:\n  sasl_password: {SASL}: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(path, env={})
    assert exc.value.key == "<file>"
    assert_hidden(*error_texts(exc.value))


@pytest.mark.parametrize(
    ("env", "key", "problem"),
    [
        (
            {"MSGSTREAM_KAFKA_SASL_PASSWORD": SASL},
            "kafka.sasl_username, kafka.sasl_password",
            "kafka.sasl_password is set but kafka.sasl_username is not; set both or neither",
        ),
        (
            {"MSGSTREAM_KAFKA_SASL_PASWORD": SASL},
            "MSGSTREAM_KAFKA_SASL_PASWORD",
            "unknown MSGSTREAM_* environment variable; did you mean "
            "'MSGSTREAM_KAFKA_SASL_PASSWORD'?",
        ),
        (
            {"MSGSTREAM_PULSAR_AUTH_TOKEN": TOKEN, "MSGSTREAM_PULSAR_AUTH_PLUGIN": TOKEN_PLUGIN},
            "pulsar.auth_token, pulsar.auth_plugin",
            "both are set; use a token or an authentication plugin, not both",
        ),
        (
            {"MSGSTREAM_KAFKA_SASL_USERNAME": "alice", "MSGSTREAM_KAFKA_SASL_PASSWORD": MASK},
            "kafka.sasl_password",
            f"{MASK!r} is what a shown configuration has in place of a secret (to_dict() "
            "masks them): give the secret itself (from environment variable "
            "MSGSTREAM_KAFKA_SASL_PASSWORD)",
        ),
        (
            {"MSGSTREAM_KAFKA_CONFLUENT": f'{{"sasl.password": "{RD_PASSWORD}", "linger.ms": 5'},
            "kafka.confluent",
            f"invalid value {MASK} (EOF while parsing an object at line 1 column 52) in "
            "environment variable MSGSTREAM_KAFKA_CONFLUENT: expected a JSON object",
        ),
        (
            {"MSGSTREAM_KAFKA_PRODUCER": f'{{"sasl_plain_password": {NUMBER}}}'},
            "kafka.producer.sasl_plain_password",
            f"expected a string (its name says it is a secret), got {MASK} (int) (from "
            "environment variable MSGSTREAM_KAFKA_PRODUCER)",
        ),
        (
            {"MSGSTREAM_PULSAR_ADDRESS": f"pulsar://alice:{URL_PASSWORD}@127.0.0.1:6650"},
            "pulsar.address",
            f"{PULSAR_URL_CREDENTIALS} (from environment variable MSGSTREAM_PULSAR_ADDRESS)",
        ),
    ],
    ids=[
        "password without user name",
        "misspelt variable",
        "token plus plugin",
        "the mask",
        "a map that does not parse",
        "a number for a pass-through secret",
        "credentials in an address",
    ],
)
def test_an_environment_error_names_the_key_and_shows_no_secret(
    env: dict[str, str], key: str, problem: str, records: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(env=env)
    assert (exc.value.key, exc.value.problem) == (key, problem)
    assert_hidden(*error_texts(exc.value))
    assert_no_record_shows_a_secret(records)


@pytest.mark.parametrize(
    "build",
    [
        lambda: KafkaConfig(sasl_username="alice", sasl_password=NUMBER),
        lambda: Config().with_values({"kafka": {"sasl_username": "a", "sasl_password": NUMBER}}),
        lambda: PulsarConfig().replace(auth_token=[TOKEN]),
    ],
    ids=["a section", "with_values", "a section's replace"],
)
def test_a_secret_of_the_wrong_type_in_code_shows_no_secret(build: Any) -> None:
    """Not even the pydantic error behind the ConfigError (its text holds the input) is
    reachable from it."""
    with pytest.raises(ConfigError) as exc:
        build()
    assert exc.value.problem.startswith(f"expected a string, got {MASK} (")
    assert exc.value.__context__ is None and exc.value.__cause__ is None
    assert_hidden(*error_texts(exc.value))


@pytest.mark.parametrize(
    ("build", "key", "problem"),
    [
        (
            lambda: KafkaConfig(confluent={"sasl.password": NUMBER}),
            "kafka.confluent.sasl.password",
            f"expected a string (its name says it is a secret), got {MASK} (int)",
        ),
        (
            lambda: Config().with_values({"kafka": {"producer": {"sasl_plain_password": [1]}}}),
            "kafka.producer.sasl_plain_password",
            f"expected a string, number or boolean, got {MASK} (list)",
        ),
        (
            lambda: KafkaConfig().replace(consumer=f"sasl_plain_password={AIO_CONSUMER}"),
            "kafka.consumer",
            f"expected a mapping, got {MASK} (str)",
        ),
        (
            lambda: PulsarConfig().replace(admin_url=f"http://alice:{URL_PASSWORD}@h:8080"),
            "pulsar.admin_url",
            PULSAR_URL_CREDENTIALS,
        ),
    ],
    ids=["a section", "with_values", "a section's replace", "an address"],
)
def test_a_pass_through_secret_or_address_refused_in_code_shows_no_secret(
    build: Any, key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        build()
    assert (exc.value.key, exc.value.problem) == (key, problem)
    assert exc.value.__context__ is None and exc.value.__cause__ is None
    assert_hidden(*error_texts(exc.value))


# ----------------------------------------------------------------------------- bench report


def test_the_bench_report_sections_show_no_secret(tmp_path: Path) -> None:
    plain = secret_data()
    plain["kafka"]["security_protocol"] = "SASL_PLAINTEXT"  # aiokafka: no TLS files to load
    config = load("dict", plain, tmp_path)
    tls = load("dict", secret_data(), tmp_path)
    pulsar = load("dict", plugin_data(), tmp_path)
    reports = {
        "msgstream kafka": MsgStreamTarget(tls).client(),
        "msgstream pulsar": MsgStreamTarget(pulsar).client(),
        "raw aiokafka": RawAiokafka(config).client(),
        "raw confluent": RawConfluent(tls).client(),
    }
    for report in reports.values():
        assert_hidden(json.dumps(report))
    kafka = reports["msgstream kafka"]["settings"]
    assert (kafka["sasl_password"], kafka["ssl_key_password"]) == (MASK, MASK)
    assert kafka["sasl_username"] == "alice"
    assert reports["msgstream pulsar"]["settings"]["auth_params"] == MASK
    assert reports["raw aiokafka"]["settings"]["sasl_plain_password"] == MASK
    confluent = reports["raw confluent"]["settings"]
    assert (confluent["sasl.password"], confluent["ssl.key.password"]) == (MASK, MASK)
    assert confluent["sasl.username"] == "alice"


def test_the_bench_report_sections_show_no_pass_through_secret(tmp_path: Path) -> None:
    config = load("dict", pass_through_data(), tmp_path)
    reports = {
        "msgstream": MsgStreamTarget(config).client(),
        "raw aiokafka": RawAiokafka(config).client(),
        "raw confluent": RawConfluent(config).client(),
    }
    for report in reports.values():
        assert_hidden(json.dumps(report))
    settings = reports["msgstream"]["settings"]
    assert settings["producer"] == {"sasl_plain_password": MASK, "max_batch_size": 65536}
    assert (settings["confluent"]["ssl.key.pem"], settings["confluent"]["linger.ms"]) == (MASK, 5)
    raw = reports["raw aiokafka"]["settings"]
    assert (raw["sasl_plain_password"], raw["max_batch_size"]) == (MASK, 65536)
    raw = reports["raw confluent"]["settings"]
    named = ["sasl.password", "ssl.keystore.password", "ssl.key.pem", "linger.ms"]
    assert [raw[name] for name in named] == [MASK, MASK, MASK, 5]


def test_the_bench_target_config_keeps_the_secrets(tmp_path: Path) -> None:
    config = load("dict", secret_data(), tmp_path)
    built = target_config(config, "kafka", {"kafka": "127.0.0.1:19092"}, ["kafka.acks=1"])
    assert (built.kafka.brokers, built.kafka.acks) == ("127.0.0.1:19092", "1")
    assert reveal(built.kafka.sasl_password) == SASL
    assert reveal(built.kafka.ssl_key_password) == KEY_PASSWORD
    passing = load("dict", pass_through_data(), tmp_path)
    overrides = ["kafka.acks=1", f"kafka.consumer={{sasl_plain_password: {AIO_PRODUCER}}}"]
    built = target_config(passing, "kafka", {}, overrides)
    assert revealed(built.kafka.confluent) == pass_through()["confluent"]
    assert revealed(built.kafka.consumer) == {"sasl_plain_password": AIO_PRODUCER}


@pytest.mark.parametrize(
    ("override", "shown"),
    [
        (f"kafkaa.sasl_password={SASL}", "--set 'kafkaa.sasl_password'"),
        (f"sasl_password={SASL}", "--set 'sasl_password'"),
    ],
)
def test_a_bench_override_that_is_no_dotted_key_shows_no_value(
    override: str, shown: str, tmp_path: Path
) -> None:
    with pytest.raises(CliError) as exc:
        target_config(load("dict", secret_data(), tmp_path), None, {}, [override])
    assert str(exc.value) == f"{shown}: expected KEY=VALUE with a dotted key (kafka.acks=1)"
    assert_hidden(*error_texts(exc.value))


# ------------------------------------------------------------------------ failed connections


def kafka_nowhere(port: int, **kafka: Any) -> Config:
    """Every Kafka secret, the pass-through ones too, and brokers at ``port``."""
    data = secret_data()
    data["kafka"].update(pass_through())
    data["kafka"].update(brokers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT", **kafka)
    data["msgstream"] = {"operation_timeout_s": 5.0}
    return config_from_dict(data, env={})


def delete_msg(i: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i], hash_keys=[0]
    )


@pytest.mark.parametrize("engine", ["aiokafka", "confluent"])
async def test_kafka_with_credentials_and_no_broker_shows_no_secret(
    engine: str, closed_port: int, records: pytest.LogCaptureFixture
) -> None:
    config = kafka_nowhere(closed_port, client=engine)
    with pytest.raises(BackendUnavailableError) as exc:
        async with new_msgstream(config) as stream:
            await stream.as_producer(["secrets"])
    assert str(exc.value).startswith(f"kafka at 127.0.0.1:{closed_port}: ")
    assert_hidden(*error_texts(exc.value))
    assert_no_record_shows_a_secret(records)


async def test_pulsar_with_a_token_and_no_broker_shows_no_secret(
    closed_port: int, records: pytest.LogCaptureFixture
) -> None:
    data = secret_data()
    data["mq"] = {"type": "pulsar"}
    data["pulsar"].update(address=f"pulsar://127.0.0.1:{closed_port}", connection_timeout_s=1)
    data["msgstream"] = {"operation_timeout_s": 1.0}
    config = config_from_dict(data, env={})
    with pytest.raises(BackendUnavailableError) as exc:
        async with new_msgstream(config) as stream:
            await stream.as_producer(["secrets"])
    assert str(exc.value).startswith(f"pulsar at pulsar://127.0.0.1:{closed_port}: ")
    assert_hidden(*error_texts(exc.value))
    assert_no_record_shows_a_secret(records)


def refusal_frame(reason: bytes) -> bytes:
    """A Pulsar broker's answer to a CONNECT it refuses: ``BaseCommand{ERROR:
    AuthenticationError}``."""
    error = _field(1, 0) + _field(2, 3) + _field(3, reason)
    command = _field(1, 14) + _field(14, error)
    return struct.pack(">II", len(command) + 4, len(command)) + command


async def test_a_refused_pulsar_token_is_sent_and_not_shown(
    records: pytest.LogCaptureFixture,
) -> None:
    """The credentials check presents the real token to the broker; the broker's refusal
    is an AuthenticationError that does not show it."""
    received: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        total, _ = struct.unpack(">II", await reader.readexactly(8))
        received.set_result(await reader.readexactly(total - 4))
        writer.write(refusal_frame(b"Failed to authenticate"))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    data = secret_data()
    data["mq"] = {"type": "pulsar"}
    data["pulsar"]["address"] = f"pulsar://127.0.0.1:{port}"
    async with server:
        client = new_client(config_from_dict(data, env={}))
        try:
            with pytest.raises(AuthenticationError) as exc:
                await client.create_producer("secrets")
        finally:
            await client.close()
    assert TOKEN.encode() in await received
    assert "authentication failed: Failed to authenticate" in str(exc.value)
    assert_hidden(*error_texts(exc.value))
    assert_no_record_shows_a_secret(records)


class _RefusingAdmin(http.server.BaseHTTPRequestHandler):
    """A Pulsar admin API that refuses every request, recording its Authorization."""

    seen: list[str | None]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        body = b'{"reason": "Authentication required"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_admin() -> Iterator[tuple[str, list[str | None]]]:
    """The URL of a refusing admin API, and the Authorization headers it was sent."""
    seen: list[str | None] = []
    handler = type("Handler", (_RefusingAdmin,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_the_admin_api_gets_the_plugin_token_and_its_refusal_shows_none(
    refusing_admin: tuple[str, list[str | None]], records: pytest.LogCaptureFixture
) -> None:
    url, seen = refusing_admin
    data = plugin_data()
    data["pulsar"]["admin_url"] = url
    client = new_client(config_from_dict(data, env={}))
    try:
        with pytest.raises(AuthenticationError) as exc:
            await client.list_channels()
    finally:
        await client.close()
    assert seen == [f"Bearer {PARAMS_TOKEN}"]
    assert "authentication failed (HTTP 401: Authentication required)" in str(exc.value)
    assert_hidden(*error_texts(exc.value))
    assert_no_record_shows_a_secret(records)


# ----------------------------------------------------------------------------------- CLI


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``msgstream -vv ARGS`` in a child process with only ``env``'s MSGSTREAM_* variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MSGSTREAM_")}
    return subprocess.run(
        [sys.executable, "-m", "msgstream.cli.main", "-vv", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


KAFKA_ENV = {
    "MSGSTREAM_MQ_TYPE": "kafka",
    "MSGSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "MSGSTREAM_KAFKA_SASL_USERNAME": "alice",
    "MSGSTREAM_KAFKA_SASL_PASSWORD": SASL,
    "MSGSTREAM_KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD,
    "MSGSTREAM_MSGSTREAM_OPERATION_TIMEOUT_S": "5",
    **{
        env_var_name(f"kafka.{name}"): json.dumps(values) for name, values in pass_through().items()
    },
}


@pytest.mark.parametrize("engine", ["aiokafka", "confluent"])
def test_the_verbose_cli_shows_no_kafka_secret(engine: str, closed_port: int) -> None:
    env = {
        **KAFKA_ENV,
        "MSGSTREAM_KAFKA_CLIENT": engine,
        "MSGSTREAM_KAFKA_BROKERS": f"127.0.0.1:{closed_port}",
    }
    done = run_cli(env, "inspect")
    assert done.returncode == 1, done.stderr
    assert f"error: kafka at 127.0.0.1:{closed_port}: connecting:" in done.stderr
    assert "DEBUG" in done.stderr  # -vv logged what the clients did
    assert_hidden(done.stdout, done.stderr)


def test_the_verbose_cli_shows_no_pulsar_token(
    refusing_admin: tuple[str, list[str | None]], closed_port: int
) -> None:
    url, seen = refusing_admin
    env = {
        "MSGSTREAM_MQ_TYPE": "pulsar",
        "MSGSTREAM_PULSAR_ADDRESS": f"pulsar://127.0.0.1:{closed_port}",
        "MSGSTREAM_PULSAR_ADMIN_URL": url,
        "MSGSTREAM_PULSAR_AUTH_TOKEN": TOKEN,
    }
    done = run_cli(env, "inspect")
    assert done.returncode == 1, done.stderr
    assert "authentication failed (HTTP 401" in done.stderr
    assert seen and set(seen) == {f"Bearer {TOKEN}"}
    assert_hidden(done.stdout, done.stderr)


@pytest.mark.parametrize(
    ("env", "key", "problem"),
    [
        (
            {"MSGSTREAM_PULSAR_ADDRESS": f"pulsar://alice:{URL_PASSWORD}@127.0.0.1:6650"},
            "pulsar.address",
            PULSAR_URL_CREDENTIALS,
        ),
        (
            {
                "MSGSTREAM_PULSAR_ADDRESS": "pulsar://127.0.0.1:6650",
                "MSGSTREAM_PULSAR_ADMIN_URL": f"http://{URL_TOKEN}@127.0.0.1:8080",
            },
            "pulsar.admin_url",
            PULSAR_URL_CREDENTIALS,
        ),
        (
            {"MSGSTREAM_KAFKA_BROKERS": f"alice:{URL_PASSWORD}@127.0.0.1:9092"},
            "kafka.brokers",
            KAFKA_ADDRESS_CREDENTIALS,
        ),
    ],
    ids=["pulsar.address", "pulsar.admin_url", "kafka.brokers"],
)
def test_the_verbose_cli_refuses_credentials_in_an_address(
    env: dict[str, str], key: str, problem: str
) -> None:
    done = run_cli(env, "inspect")
    assert done.returncode == 2, done.stderr
    var = env_var_name(key)
    assert f"config key {key!r}: {problem} (from environment variable {var})" in done.stderr
    assert_hidden(done.stdout, done.stderr)


def test_the_verbose_cli_config_error_shows_no_secret() -> None:
    done = run_cli({"MSGSTREAM_KAFKA_SASL_PASSWORD": SASL}, "inspect")
    assert done.returncode == 2, done.stderr
    assert "kafka.sasl_password is set but kafka.sasl_username is not" in done.stderr
    assert_hidden(done.stdout, done.stderr)


# -------------------------------------------------------------------------- metrics, traces


async def test_metrics_and_spans_show_no_secret(
    tmp_path: Path, closed_port: int, records: pytest.LogCaptureFixture
) -> None:
    """A stream configured with every secret, produced to, consumed from, failing to
    produce and failing to connect, with metrics and traces on."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from prometheus_client import CollectorRegistry, generate_latest

    from msgstream.observability.metrics import PrometheusInstruments
    from msgstream.observability.observe import combine
    from msgstream.observability.tracing import TracingInstruments

    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instruments = combine(PrometheusInstruments(registry), TracingInstruments(provider))
    data = secret_data()
    data["mq"] = {"type": "memory"}
    data["memory"] = {"name": str(tmp_path)}
    data["msgstream"] = {"max_message_bytes": 200}
    config = config_from_dict(data, env={})
    async with new_msgstream(config, instruments=instruments) as stream:
        await stream.as_producer(["secrets"])
        await stream.produce(MsgPack.of(delete_msg(1)))
        big = DeleteMsg(
            msg_id=2, timestamp=3, collection_name="x" * 300, primary_keys=[2], hash_keys=[0]
        )
        with pytest.raises(Exception, match="exceeds the limit"):
            await stream.produce(MsgPack.of(big))
        await stream.as_consumer(["secrets"], "s")
        async with asyncio.timeout(10):
            pack = await anext(aiter(stream))
        assert [m.msg_id for m in pack.msgs] == [1]
    with pytest.raises(BackendUnavailableError):
        async with new_msgstream(kafka_nowhere(closed_port), instruments=instruments) as stream:
            await stream.as_producer(["secrets"])
    metrics = generate_latest(registry).decode()
    assert 'channel="secrets"' in metrics  # the stream was measured
    assert_hidden(metrics)
    spans = exporter.get_finished_spans()
    assert {span.name for span in spans} >= {"msgstream produce"}
    assert any(span.events for span in spans)  # the failed produce recorded its error
    for span in spans:
        assert_hidden(span.to_json(), dict(span.attributes or {}))
    assert_no_record_shows_a_secret(records)
