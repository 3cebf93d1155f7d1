"""Configuration: a YAML file overridden by ``MSGSTREAM_*`` environment variables.

The configuration is a tree of frozen dataclasses, one per section (``mq``, ``msgstream``,
``rocksmq``, ``kafka``, ``pulsar``, ``memory``), gathered in :class:`Config`. Everything
else -- validation, the environment-variable mapping, the reference documentation -- is
derived from the dataclass fields, their type annotations and their metadata, so adding a
key means adding one field declared with ``metadata=_key(...)``.

Supported field annotations: ``int``, ``float``, ``bool``, ``str``, ``Literal[...]`` of
strings, any of these ``| None``, and ``dict[str, Any]`` for pass-through maps of scalars
(given as a YAML mapping, or as a JSON object in an environment variable). A section checks
rules that span several keys in ``_validate``; its errors name every key involved.

Precedence, lowest first: field defaults, the YAML file, environment variables.
Each key ``section.key`` is overridden by ``MSGSTREAM_<SECTION>_<KEY>`` (upper case), e.g.
``MSGSTREAM_ROCKSMQ_PATH``. Any other ``MSGSTREAM_*`` variable is an error (it is almost
always a typo), except ``MSGSTREAM_CONFIG`` (the config file path) and ``MSGSTREAM_TEST_*``.

No broker library is imported here.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import os
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml

from msgstream.brief import brief
from msgstream.errors import ConfigError

__all__ = [
    "BACKENDS",
    "CONFIG_ENV_VAR",
    "ENV_PREFIX",
    "Config",
    "KafkaConfig",
    "LatePolicy",
    "MemoryConfig",
    "MqConfig",
    "MqType",
    "MsgStreamConfig",
    "PulsarConfig",
    "RocksmqConfig",
    "config_from_dict",
    "config_reference_markdown",
    "default_rocksmq_path",
    "env_var_name",
    "load_config",
    "resolve_backend",
]

ENV_PREFIX = "MSGSTREAM_"
#: Environment variable naming the YAML file :func:`load_config` reads when given no path.
CONFIG_ENV_VAR = "MSGSTREAM_CONFIG"
#: Environment variables with this prefix are left alone (reserved for test suites).
_IGNORED_ENV_PREFIX = "MSGSTREAM_TEST_"

MqType = Literal["default", "rocksmq", "kafka", "pulsar", "memory"]
LatePolicy = Literal["deliver", "reject"]
KafkaSecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
KafkaSaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
KafkaAcks = Literal["1", "all"]  # not "0": a send must return the offset the broker gave
KafkaCompression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
PulsarCompression = Literal["none", "lz4", "zlib", "zstd", "snappy"]
PulsarSubscriptionType = Literal["exclusive", "failover"]
#: Concrete backend names :func:`resolve_backend` can return.
BACKENDS: tuple[str, ...] = ("rocksmq", "kafka", "pulsar", "memory")

_META = "msgstream.config"


# --------------------------------------------------------------------------- field metadata


@dataclass(frozen=True)
class _Meta:
    """What a field's metadata says beyond its type."""

    doc: str
    ge: float | None = None  # value >= ge
    gt: float | None = None  # value > gt
    # Values accepted although outside the range, with what they mean (e.g. -1: "forever").
    special: tuple[tuple[float, str], ...] = ()


def _key(
    doc: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    special: Mapping[float, str] | None = None,
) -> dict[str, _Meta]:
    """Field metadata of a configuration key: its one-line description and constraints.

    Use as ``name: int = field(default=1, metadata=_key("...", ge=1))``.
    """
    return {_META: _Meta(doc=doc, ge=ge, gt=gt, special=tuple((special or {}).items()))}


@dataclass(frozen=True)
class _FieldSpec:
    """A configuration key, as derived from one dataclass field."""

    section: str
    name: str
    kind: type  # int, float, bool, str or dict
    optional: bool
    choices: tuple[str, ...]  # non-empty for Literal fields
    default: Any
    meta: _Meta

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env_var(self) -> str:
        return f"{ENV_PREFIX}{self.section}_{self.name}".upper()

    def type_text(self) -> str:
        """The type and constraints, for documentation and error messages."""
        if self.choices:
            text = "one of " + ", ".join(self.choices)
        elif self.kind is dict:
            text = "mapping"
        else:
            text = self.kind.__name__
            bounds = []
            if self.meta.ge is not None:
                bounds.append(f">= {_fmt_num(self.meta.ge)}")
            if self.meta.gt is not None:
                bounds.append(f"> {_fmt_num(self.meta.gt)}")
            if bounds:
                text += " " + " and ".join(bounds)
            for value, meaning in self.meta.special:
                text += f" or {_fmt_num(value)} ({meaning})"
        if self.optional:
            text += " or null"
        return text


def _fmt_num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_SPECS: dict[type[_Section], tuple[_FieldSpec, ...]] = {}


def _specs_of(cls: type[_Section]) -> tuple[_FieldSpec, ...]:
    """The key specs of a section class, derived from its annotations and field metadata."""
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = _derive_specs(cls)
    return specs


def _derive_specs(cls: type[_Section]) -> tuple[_FieldSpec, ...]:
    section = cls.SECTION
    hints = typing.get_type_hints(cls)
    specs: list[_FieldSpec] = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(_META)
        if not isinstance(meta, _Meta):
            raise TypeError(f"{cls.__name__}.{f.name} needs metadata=_key(...)")
        annotation = hints[f.name]
        optional = False
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {annotation!r}")
            optional = True
            annotation = args[0]
            origin = typing.get_origin(annotation)
        choices: tuple[str, ...] = ()
        if origin is Literal:
            choices = typing.get_args(annotation)
            if not all(isinstance(c, str) for c in choices):
                raise TypeError(f"{cls.__name__}.{f.name}: only Literal strings are supported")
            kind: type = str
        elif annotation in (int, float, bool, str):
            kind = annotation
        elif origin is dict and typing.get_args(annotation)[:1] == (str,):
            kind = dict
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {annotation!r}")
        specs.append(
            _FieldSpec(
                section=section,
                name=f.name,
                kind=kind,
                optional=optional,
                choices=choices,
                default=f.default_factory() if kind is dict else f.default,  # type: ignore[operator]
                meta=meta,
            )
        )
    return tuple(specs)


# --------------------------------------------------------------------------- validation


def _check(spec: _FieldSpec, value: object) -> Any:
    """Return ``value`` normalised for ``spec`` (int -> float), or raise ConfigError."""
    key = spec.dotted
    if value is None and spec.kind is dict:  # a YAML key with every entry commented out
        return {}
    if value is None:
        if spec.optional:
            return None
        raise ConfigError(key, f"must not be null (expected {spec.type_text()})")
    if spec.choices:
        if isinstance(value, int) and not isinstance(value, bool) and str(value) in spec.choices:
            return str(value)  # YAML reads `acks: 1` as an integer
        if not isinstance(value, str) or value not in spec.choices:
            allowed = ", ".join(repr(c) for c in spec.choices)
            hint = ""
            if isinstance(value, str):
                close = difflib.get_close_matches(value, spec.choices, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(key, f"invalid value {brief(value)}: must be one of {allowed}{hint}")
        return value
    if spec.kind is dict:
        return _check_mapping(key, value)
    if spec.kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, f"expected a boolean, got {_describe(value)}")
        return value
    if spec.kind is str:
        if not isinstance(value, str):
            raise ConfigError(key, f"expected a string, got {_describe(value)}")
        if value == "":
            # An empty optional string means "unset"; a required one is never meaningful.
            if spec.optional:
                return None
            raise ConfigError(key, "must not be empty")
        return value
    number: int | float
    if spec.kind is int:
        # bool is a subclass of int, but `receive_buffer_size: true` is surely a mistake.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"expected an integer, got {_describe(value)}")
        number = value
    else:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(key, f"expected a number, got {_describe(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise ConfigError(key, f"expected a finite number, got {value!r}")
    if any(number == special for special, _ in spec.meta.special):
        return number
    meta = spec.meta
    if (meta.ge is not None and number < meta.ge) or (meta.gt is not None and number <= meta.gt):
        raise ConfigError(key, f"out of range: got {value!r}, expected {spec.type_text()}")
    return number


def _check_mapping(key: str, value: object) -> dict[str, Any]:
    """A pass-through map: string keys, scalar values (handed to a broker client as is)."""
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"expected a mapping, got {_describe(value)}")
    result: dict[str, Any] = {}
    for item_key, item in value.items():
        if not isinstance(item_key, str) or not item_key:
            raise ConfigError(key, f"keys must be non-empty strings, got {_describe(item_key)}")
        if item is not None and not isinstance(item, str | int | float | bool):
            raise ConfigError(
                f"{key}.{item_key}", f"expected a string, number or boolean, got {_describe(item)}"
            )
        result[item_key] = item
    return result


def _describe(value: object) -> str:
    # Bounded: a document may nest deeper than a plain repr can recurse, or be huge.
    return f"{brief(value)} ({type(value).__name__})"


_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


def _parse_env(spec: _FieldSpec, var: str, text: str) -> Any:
    """Parse an environment variable's text by the field's type, then validate it."""
    stripped = text.strip()
    value: object
    try:
        if spec.optional and stripped.lower() in ("", "none", "null"):
            value = None
        elif spec.kind is bool:
            lowered = stripped.lower()
            if lowered not in _TRUE | _FALSE:
                raise ValueError("expected true/false/1/0/yes/no")
            value = lowered in _TRUE
        elif spec.kind is int:
            value = int(stripped)
        elif spec.kind is float:
            value = float(stripped)
        elif spec.choices:
            value = stripped
        elif spec.kind is dict:
            value = json.loads(stripped) if stripped else {}
        else:
            value = text
    except ValueError:  # json.JSONDecodeError is a ValueError too
        if spec.kind is bool:
            expected = "a boolean (true/false/1/0/yes/no)"
        elif spec.kind is dict:
            expected = "a JSON object"
        else:
            expected = spec.type_text()
        raise ConfigError(
            spec.dotted,
            f"invalid value {text!r} in environment variable {var}: expected {expected}",
        ) from None
    try:
        return _check(spec, value)
    except ConfigError as exc:
        raise ConfigError(spec.dotted, f"{exc.problem} (from environment variable {var})") from None


def _unknown(key: str, candidates: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, candidates, n=1)
    if close:
        return ConfigError(key, f"unknown key; did you mean {close[0]!r}?")
    return ConfigError(key, "unknown key; known keys: " + ", ".join(sorted(candidates)))


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class _Section:
    """Base of every section: validates (and normalises) all fields on construction."""

    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for spec in _specs_of(type(self)):
            value = _check(spec, getattr(self, spec.name))
            object.__setattr__(self, spec.name, value)
        self._validate()

    def _validate(self) -> None:
        """Check rules spanning several keys (after each key was checked on its own)."""


@dataclass(frozen=True)
class MqConfig(_Section):
    """Which message-queue backend to use."""

    SECTION: ClassVar[str] = "mq"

    type: MqType = field(
        default="default",
        metadata=_key(
            "Backend; 'default' picks rocksmq if rocksmq.path is set, else pulsar if "
            "pulsar.address is set, else kafka if kafka.brokers is set, else rocksmq"
        ),
    )


@dataclass(frozen=True)
class MsgStreamConfig(_Section):
    """Stream runtime settings, shared by every backend."""

    SECTION: ClassVar[str] = "msgstream"

    receive_buffer_size: int = field(
        default=1024,
        metadata=_key("Messages buffered per channel in the bounded receive queue", ge=1),
    )
    receive_buffer_bytes: int = field(
        default=67108864,
        metadata=_key(
            "Payload bytes buffered per channel in the receive queue (plus about one "
            "message); a full queue stops reading its channel",
            ge=1,
        ),
    )
    tt_channel_buffer_size: int = field(
        default=65536,
        metadata=_key(
            "Max messages a TtMsgStream buffers per channel ahead of the time-tick barrier", ge=1
        ),
    )
    tt_channel_buffer_bytes: int = field(
        default=8388608,
        metadata=_key(
            "Max payload bytes a TtMsgStream buffers per channel ahead of the time-tick "
            "barrier (plus about one message); bounds memory while a channel does not tick",
            ge=1,
        ),
    )
    late_policy: LatePolicy = field(
        default="deliver",
        metadata=_key(
            "What to do with a data message timestamped at or below its channel's last "
            "time tick: deliver it anyway or reject it"
        ),
    )
    max_message_bytes: int = field(
        default=67108864, metadata=_key("Largest message accepted, in bytes", ge=1)
    )
    pursuit_lag_s: float = field(
        default=10.0,
        metadata=_key(
            "Lag (seconds) beyond which a TtMsgStream merges packs to catch up; 0 disables",
            ge=0,
        ),
    )
    pursuit_buffer_size_bytes: int = field(
        default=104857600,
        metadata=_key("Max bytes of one merged pack in pursuit mode", ge=1),
    )
    pursuit_buffer_time_s: float = field(
        default=1.0,
        metadata=_key(
            "Max seconds spent merging already-read packs into one in pursuit mode", gt=0
        ),
    )
    operation_timeout_s: float = field(
        default=30.0,
        metadata=_key(
            "Deadline (seconds) of one broker operation, retries included (Kafka, Pulsar)", gt=0
        ),
    )
    tick_interval_s: float = field(
        default=0.05, metadata=_key("Interval (seconds) between time ticks", gt=0)
    )


@dataclass(frozen=True)
class RocksmqConfig(_Section):
    """The embedded store (rocksmq) backend."""

    SECTION: ClassVar[str] = "rocksmq"

    path: str | None = field(
        default=None,
        metadata=_key(
            "Directory of the embedded store; null means $XDG_DATA_HOME/msgstream/rocksmq "
            "(else ~/.local/share/msgstream/rocksmq). Setting it makes mq.type 'default' "
            "pick rocksmq"
        ),
    )
    sync: bool = field(default=False, metadata=_key("fsync the store on every produce"))
    page_size_bytes: int = field(
        default=67108864, metadata=_key("Size of one retention page, in bytes", ge=1)
    )
    retention_max_age_s: float = field(
        default=259200.0,
        metadata=_key(
            "Seconds an acknowledged page is kept after it closed",
            ge=0,
            special={-1: "keep forever"},
        ),
    )
    retention_max_size_bytes: int = field(
        default=-1,
        metadata=_key(
            "Channel size (all retained bytes) above which its oldest acknowledged pages go",
            ge=0,
            special={-1: "unlimited"},
        ),
    )
    retention_check_interval_s: float = field(
        default=60.0, metadata=_key("Seconds between retention sweeps", gt=0)
    )
    subscription_idle_expiry_s: float = field(
        default=604800.0,
        metadata=_key(
            "Seconds after which an idle subscription is dropped", ge=0, special={-1: "never"}
        ),
    )
    compaction_interval_s: float = field(
        default=3600.0, metadata=_key("Seconds between store compactions", gt=0)
    )


@dataclass(frozen=True)
class KafkaConfig(_Section):
    """The Apache Kafka backend."""

    SECTION: ClassVar[str] = "kafka"

    brokers: str | None = field(
        default=None,
        metadata=_key(
            "Comma-separated host:port bootstrap servers; setting it makes mq.type 'default' "
            "pick kafka (unless rocksmq.path or pulsar.address is set)"
        ),
    )
    client_id: str = field(default="msgstream", metadata=_key("Client id reported to the brokers"))
    security_protocol: KafkaSecurityProtocol = field(
        default="PLAINTEXT", metadata=_key("How clients talk to the brokers")
    )
    sasl_mechanism: KafkaSaslMechanism = field(
        default="PLAIN", metadata=_key("SASL mechanism (security_protocol SASL_PLAINTEXT/SASL_SSL)")
    )
    sasl_username: str | None = field(
        default=None, metadata=_key("SASL user name; needs kafka.sasl_password")
    )
    sasl_password: str | None = field(
        default=None, metadata=_key("SASL password; needs kafka.sasl_username")
    )
    ssl_cafile: str | None = field(
        default=None,
        metadata=_key("CA bundle (PEM) to verify the brokers; null uses the system CAs"),
    )
    ssl_certfile: str | None = field(
        default=None, metadata=_key("Client certificate (PEM) for mutual TLS")
    )
    ssl_keyfile: str | None = field(
        default=None, metadata=_key("Private key (PEM) of kafka.ssl_certfile")
    )
    ssl_key_password: str | None = field(
        default=None, metadata=_key("Password of kafka.ssl_keyfile, if it is encrypted")
    )
    ssl_check_hostname: bool = field(
        default=True, metadata=_key("Check that the broker certificate matches its host name")
    )
    acks: KafkaAcks = field(
        default="all",
        metadata=_key(
            "Replicas that must have a message before a send is acknowledged ('all' never "
            "loses an acknowledged message to a single broker failure; '0' is not offered: "
            "a send returns the offset the broker assigned)"
        ),
    )
    linger_ms: int = field(
        default=0,
        metadata=_key("Milliseconds a send waits to fill a batch; 0 favours latency", ge=0),
    )
    compression: KafkaCompression = field(
        default="none", metadata=_key("Compression of produced batches")
    )
    max_request_size: int = field(
        default=1048576,
        metadata=_key(
            "Largest produce request in bytes; a bigger message is refused before sending", ge=1
        ),
    )
    request_timeout_s: float = field(
        default=30.0, metadata=_key("Seconds a broker request may take", gt=0)
    )
    replication_factor: int = field(
        default=1,
        metadata=_key(
            "Replication factor of the topics msgstream creates",
            ge=1,
            special={-1: "broker default"},
        ),
    )
    topic_config: dict[str, Any] = field(
        default_factory=dict,
        metadata=_key("Topic configs for created topics, e.g. {retention.ms: 604800000}"),
    )
    producer: dict[str, Any] = field(
        default_factory=dict,
        metadata=_key(
            "Extra aiokafka producer arguments, passed as is (e.g. {max_batch_size: 65536})"
        ),
    )
    consumer: dict[str, Any] = field(
        default_factory=dict,
        metadata=_key(
            "Extra aiokafka consumer arguments, passed as is (e.g. {fetch_max_bytes: 1048576})"
        ),
    )

    def _validate(self) -> None:
        if (self.sasl_username is None) != (self.sasl_password is None):
            given, missing = (
                ("sasl_username", "sasl_password")
                if self.sasl_password is None
                else ("sasl_password", "sasl_username")
            )
            raise ConfigError(
                "kafka.sasl_username, kafka.sasl_password",
                f"kafka.{given} is set but kafka.{missing} is not; set both or neither",
            )
        if self.security_protocol.startswith("SASL_") and self.sasl_username is None:
            raise ConfigError(
                "kafka.sasl_username, kafka.sasl_password",
                f"required when kafka.security_protocol is {self.security_protocol}",
            )
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError(
                "kafka.ssl_certfile, kafka.ssl_keyfile",
                "a client certificate needs its key and the reverse; set both or neither",
            )


@dataclass(frozen=True)
class PulsarConfig(_Section):
    """The Apache Pulsar backend."""

    SECTION: ClassVar[str] = "pulsar"

    address: str | None = field(
        default=None,
        metadata=_key(
            "Service URL, e.g. pulsar://localhost:6650 (pulsar+ssl:// for TLS), or a bare host "
            "name joined with pulsar.port; setting it makes mq.type 'default' pick pulsar "
            "(unless rocksmq.path is set)"
        ),
    )
    port: int = field(
        default=6650,
        metadata=_key("Broker port, used when pulsar.address is a bare host name", ge=1),
    )
    admin_url: str | None = field(
        default=None,
        metadata=_key(
            "Admin REST URL (http[s]://host:port), used to check, list and delete channels "
            "and subscriptions; null means the service host on port 8080 (8443 for TLS)"
        ),
    )
    tenant: str = field(default="public", metadata=_key("Pulsar tenant"))
    namespace: str = field(default="default", metadata=_key("Pulsar namespace"))
    auth_token: str | None = field(
        default=None,
        metadata=_key("Token (JWT) for token authentication; excludes pulsar.auth_plugin"),
    )
    auth_plugin: str | None = field(
        default=None,
        metadata=_key(
            "Authentication plugin class, passed as is (e.g. "
            "org.apache.pulsar.client.impl.auth.AuthenticationTls); excludes pulsar.auth_token"
        ),
    )
    auth_params: str | None = field(
        default=None,
        metadata=_key("Parameters of pulsar.auth_plugin, in the plugin's own format"),
    )
    tls_trust_certs_file: str | None = field(
        default=None,
        metadata=_key("CA bundle (PEM) to verify the broker over TLS; null uses the system CAs"),
    )
    tls_allow_insecure_connection: bool = field(
        default=False, metadata=_key("Accept a broker certificate that cannot be verified")
    )
    tls_validate_hostname: bool = field(
        default=True, metadata=_key("Check that the broker certificate matches its host name")
    )
    connection_timeout_s: float = field(
        default=10.0, metadata=_key("Seconds to open a connection to a broker", gt=0)
    )
    operation_timeout_s: float = field(
        default=30.0,
        metadata=_key(
            "Seconds the Pulsar client retries one operation (lookup, create, seek) before "
            "giving up; msgstream.operation_timeout_s bounds each call as a whole",
            gt=0,
        ),
    )
    max_message_size: int = field(
        default=5242880,
        metadata=_key(
            "Largest message in bytes (the broker's maxMessageSize, 5 MiB by default); a "
            "bigger one is refused before sending",
            ge=1,
        ),
    )
    batching: bool = field(
        default=False,
        metadata=_key("Batch produced messages (throughput) instead of one entry each (latency)"),
    )
    batching_max_messages: int = field(
        default=1000, metadata=_key("Max messages in one batch (pulsar.batching)", ge=1)
    )
    batching_max_delay_ms: int = field(
        default=10,
        metadata=_key("Milliseconds a batch waits to fill (pulsar.batching)", ge=0),
    )
    compression: PulsarCompression = field(
        default="none", metadata=_key("Compression of produced messages")
    )
    subscription_type: PulsarSubscriptionType = field(
        default="exclusive",
        metadata=_key(
            "Subscription type; both keep order and allow cumulative acknowledgement "
            "(failover lets a standby consumer take over)"
        ),
    )
    receiver_queue_size: int = field(
        default=1000, metadata=_key("Messages a consumer prefetches from the broker", ge=1)
    )

    def _validate(self) -> None:
        if self.auth_token is not None and self.auth_plugin is not None:
            raise ConfigError(
                "pulsar.auth_token, pulsar.auth_plugin",
                "both are set; use a token or an authentication plugin, not both",
            )
        if self.auth_params is not None and self.auth_plugin is None:
            raise ConfigError(
                "pulsar.auth_params, pulsar.auth_plugin",
                "pulsar.auth_params is set but pulsar.auth_plugin is not",
            )


@dataclass(frozen=True)
class MemoryConfig(_Section):
    """The in-process memory backend (tests, examples)."""

    SECTION: ClassVar[str] = "memory"

    name: str = field(
        default="default",
        metadata=_key("Name of the in-process broker; streams sharing a name see each other"),
    )


# --------------------------------------------------------------------------- Config


@dataclass(frozen=True)
class Config:
    """The whole configuration. Build it with :func:`load_config` or :func:`config_from_dict`."""

    mq: MqConfig = field(default_factory=MqConfig)
    msgstream: MsgStreamConfig = field(default_factory=MsgStreamConfig)
    rocksmq: RocksmqConfig = field(default_factory=RocksmqConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    pulsar: PulsarConfig = field(default_factory=PulsarConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)

    def __post_init__(self) -> None:
        for name, cls in _sections().items():
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(name, f"expected a {cls.__name__}")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The effective configuration as plain data (the shape of the YAML file)."""
        return {
            name: {spec.name: getattr(getattr(self, name), spec.name) for spec in _specs_of(cls)}
            for name, cls in _sections().items()
        }

    def rocksmq_path(self, env: Mapping[str, str] | None = None) -> str:
        """``rocksmq.path`` (with ``~`` expanded), or :func:`default_rocksmq_path`."""
        if self.rocksmq.path is not None:
            return os.path.expanduser(self.rocksmq.path)
        return default_rocksmq_path(env)

    def backend(self) -> str:
        """Shorthand for :func:`resolve_backend`."""
        return resolve_backend(self)


@functools.cache
def _sections() -> dict[str, type[_Section]]:
    """Section name -> section class, in declaration order, from :class:`Config`'s fields."""
    hints = typing.get_type_hints(Config)
    result: dict[str, type[_Section]] = {}
    for f in dataclasses.fields(Config):
        cls = hints[f.name]
        if not (isinstance(cls, type) and issubclass(cls, _Section)) or f.name != cls.SECTION:
            raise TypeError(f"Config.{f.name} must be a _Section with SECTION = {f.name!r}")
        result[f.name] = cls
    return result


def _all_specs() -> Iterator[_FieldSpec]:
    for cls in _sections().values():
        yield from _specs_of(cls)


@functools.cache
def _env_map() -> dict[str, _FieldSpec]:
    result: dict[str, _FieldSpec] = {}
    for spec in _all_specs():
        if spec.env_var in result:  # e.g. section "a_b" key "c" vs section "a" key "b_c"
            raise TypeError(f"{spec.dotted} and {result[spec.env_var].dotted} share an env var")
        result[spec.env_var] = spec
    return result


def env_var_name(key: str) -> str:
    """The environment variable overriding a dotted key, e.g. ``MSGSTREAM_ROCKSMQ_PATH``."""
    for spec in _all_specs():
        if spec.dotted == key:
            return spec.env_var
    raise _unknown(key, [s.dotted for s in _all_specs()])


# --------------------------------------------------------------------------- loading


def config_from_dict(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Config:
    """Build a validated :class:`Config` from YAML-shaped data, then apply ``env`` overrides.

    ``env`` defaults to ``os.environ``; pass ``{}`` to ignore the environment. A section
    whose value is ``None`` (a YAML key with everything under it commented out) is empty.
    """
    if env is None:
        env = os.environ
    if not isinstance(data, Mapping):
        raise ConfigError("<root>", f"expected a mapping of sections, got {_describe(data)}")
    sections = _sections()
    values: dict[str, dict[str, Any]] = {name: {} for name in sections}

    for section_key, section_data in data.items():
        section = str(section_key)
        if section not in sections:
            raise _unknown(section, list(sections))
        if section_data is None:
            continue
        if not isinstance(section_data, Mapping):
            raise ConfigError(section, f"expected a mapping of keys, got {_describe(section_data)}")
        specs = {spec.name: spec for spec in _specs_of(sections[section])}
        for raw_key, value in section_data.items():
            name = str(raw_key)
            if name not in specs:
                raise _unknown(f"{section}.{name}", [s.dotted for s in specs.values()])
            values[section][name] = _check(specs[name], value)

    env_map = _env_map()
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV_VAR:
            continue
        if var.startswith(_IGNORED_ENV_PREFIX):
            continue
        spec = env_map.get(var)
        if spec is None:
            # Compare without the shared prefix, or everything looks "close".
            n = len(ENV_PREFIX)
            close = difflib.get_close_matches(var[n:], [v[n:] for v in env_map], n=1)
            hint = f"; did you mean {ENV_PREFIX + close[0]!r}?" if close else ""
            raise ConfigError(var, f"unknown {ENV_PREFIX}* environment variable{hint}")
        values[spec.section][spec.name] = _parse_env(spec, var, env[var])

    built: dict[str, Any] = {name: cls(**values[name]) for name, cls in sections.items()}
    return Config(**built)


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Load the YAML file at ``path`` and apply ``MSGSTREAM_*`` overrides from ``env``.

    Without ``path``, the file named by ``$MSGSTREAM_CONFIG`` (looked up in ``env``) is
    read if set, else only defaults and environment overrides apply. ``env`` defaults to
    ``os.environ``.
    """
    if env is None:
        env = os.environ
    if path is None:
        path = env.get(CONFIG_ENV_VAR) or None
    data: Any = {}
    if path is not None:
        fspath = os.fspath(path)
        try:
            with open(fspath, encoding="utf-8") as fh:
                data = yaml.safe_load(fh)
        except OSError as exc:
            raise ConfigError("<file>", f"cannot read {fspath}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError("<file>", f"{fspath} is not UTF-8 text: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError("<file>", f"invalid YAML in {fspath}: {exc}") from exc
        except RecursionError:  # PyYAML parses nested collections recursively
            raise ConfigError("<file>", f"{fspath} nests collections too deeply") from None
        if data is None:  # empty file
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError(
                "<file>", f"{fspath}: expected a mapping of sections, got {type(data).__name__}"
            )
    return config_from_dict(data, env)


# --------------------------------------------------------------------------- backends, paths


def resolve_backend(cfg: Config) -> str:
    """The concrete backend ``cfg`` selects: one of :data:`BACKENDS`.

    ``mq.type: default`` picks rocksmq if ``rocksmq.path`` is set, else pulsar if
    ``pulsar.address`` is set, else kafka if ``kafka.brokers`` is set, else rocksmq at
    :func:`default_rocksmq_path`. An explicit kafka or pulsar type requires its address.
    """
    mq_type = cfg.mq.type
    if mq_type == "default":
        if cfg.rocksmq.path is not None:
            return "rocksmq"
        if cfg.pulsar.address is not None:
            return "pulsar"
        if cfg.kafka.brokers is not None:
            return "kafka"
        return "rocksmq"
    if mq_type == "kafka" and cfg.kafka.brokers is None:
        raise ConfigError("kafka.brokers", "required when mq.type is kafka")
    if mq_type == "pulsar" and cfg.pulsar.address is None:
        raise ConfigError("pulsar.address", "required when mq.type is pulsar")
    return mq_type


def default_rocksmq_path(env: Mapping[str, str] | None = None) -> str:
    """``$XDG_DATA_HOME/msgstream/rocksmq``, or ``~/.local/share/msgstream/rocksmq``.

    Per the XDG spec, an unset, empty or relative ``XDG_DATA_HOME`` is ignored.
    """
    if env is None:
        env = os.environ
    xdg = env.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return str(base / "msgstream" / "rocksmq")


# --------------------------------------------------------------------------- documentation


def _yaml_scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return json.dumps(value)
    return repr(value)


def config_reference_markdown() -> str:
    """A markdown table of every key: key, env var, type, default, description."""
    lines = [
        "| Key | Environment variable | Type | Default | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for spec in _all_specs():
        cells = [
            f"`{spec.dotted}`",
            f"`{spec.env_var}`",
            spec.type_text(),
            f"`{_yaml_scalar(spec.default)}`",
            spec.meta.doc,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
