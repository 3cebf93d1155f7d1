"""Configuration: a YAML file overridden by ``MSGSTREAM_*`` environment variables.

The configuration is a :class:`Config` of sections: ``mq`` (which backend), ``msgstream``
(the stream runtime, shared by every backend) and one section per registered backend,
declared in that backend's package (see :mod:`msgstream.configuration.plugins`). Each section is a
frozen pydantic model (:mod:`msgstream.configuration.sections`); validation, the environment
mapping, the error texts and the reference documentation all derive from its fields.

Precedence, lowest first: field defaults, the YAML file, environment variables.
Each key ``section.key`` is overridden by ``MSGSTREAM_<SECTION>_<KEY>`` (upper case), e.g.
``MSGSTREAM_MSGSTREAM_TICK_INTERVAL_S``. Any other ``MSGSTREAM_*`` variable is an error (it
is almost always a typo), except ``MSGSTREAM_CONFIG`` (the config file path) and
``MSGSTREAM_TEST_*``. The environment is read from the ``env`` mapping callers pass
(``os.environ`` by default), which is why pydantic-settings, bound to the process
environment and without "did you mean" for unknown variables, is not used: pydantic
converts each variable's text by the key's type (:meth:`TypeAdapter.validate_strings`).

No broker library is imported here.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

import yaml
from pydantic import (
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..errors import ConfigError
from .config_errors import describe, unknown_key
from .config_keys import ENV_PREFIX, MASK, ConfigKey, names_a_secret
from .limits import DEFAULT_MAX_MESSAGE_BYTES, MiB
from .plugins import (
    BackendSpec,
    backend_spec,
    backend_specs,
    fallback_backend,
    selecting_backends,
)
from .sections import Count, FrozenModel, Seconds, Section

__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_PREFIX",
    "Config",
    "ConfigKey",
    "LatePolicy",
    "MetricsConfig",
    "MqConfig",
    "MsgStreamConfig",
    "TracingConfig",
    "config_from_dict",
    "config_keys",
    "config_reference_markdown",
    "env_var_name",
    "load_config",
    "resolve_backend",
    "split_key",
    "STREAM_DEFAULTS",
    "stream_option",
    "text_value",
]

#: Environment variable naming the YAML file :func:`load_config` reads when given no path.
CONFIG_ENV_VAR = "MSGSTREAM_CONFIG"
#: Environment variables with this prefix are left alone (reserved for test suites).
_IGNORED_ENV_PREFIX = "MSGSTREAM_TEST_"

LatePolicy = Literal["deliver", "reject"]
S = TypeVar("S", bound=Section)


# --------------------------------------------------------------------------- core sections


class MqConfig(Section):
    """Which message-queue backend to use: ``default`` or a registered backend's name."""

    SECTION: ClassVar[str] = "mq"

    type: str = "default"
    """Backend"""

    @field_validator("type")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in cls.key_choices("type"):
            raise PydanticCustomError("literal_error", "not a registered backend")
        return value

    @classmethod
    def key_choices(cls, name: str) -> tuple[str, ...]:
        return ("default", *backend_specs()) if name == "type" else ()

    @classmethod
    def key_doc(cls, name: str) -> str:
        if name != "type":
            return super().key_doc(name)
        picks = [f"{s.name} if {s.name}.{s.selected_by} is set" for s in selecting_backends()]
        fallback = fallback_backend()
        if fallback is not None:
            picks.append(fallback.name)
        return "Backend; 'default' picks " + ", else ".join(picks)


class MsgStreamConfig(Section):
    """Stream runtime settings, shared by every backend."""

    SECTION: ClassVar[str] = "msgstream"

    receive_buffer_size: Count = 1024
    """Messages buffered per channel in the bounded receive queue"""

    receive_buffer_bytes: Count = 64 * MiB
    """Payload bytes buffered per channel in the receive queue (plus about one message); a
    full queue stops reading its channel"""

    tt_channel_buffer_size: Count = 65536
    """Max messages a TtMsgStream buffers per channel ahead of the time-tick barrier"""

    tt_channel_buffer_bytes: Count = 8 * MiB
    """Max payload bytes a TtMsgStream buffers per channel ahead of the time-tick barrier
    (plus about one message); bounds memory while a channel does not tick"""

    late_policy: LatePolicy = "deliver"
    """What to do with a data message timestamped at or below its channel's last time tick:
    deliver it anyway or reject it"""

    max_message_bytes: Count = DEFAULT_MAX_MESSAGE_BYTES
    """Largest message accepted, in bytes"""

    pursuit_lag_s: Annotated[float, Field(ge=0)] = 10.0
    """Lag (seconds) beyond which a TtMsgStream merges packs to catch up; 0 disables"""

    pursuit_buffer_size_bytes: Count = 100 * MiB
    """Max bytes of one merged pack in pursuit mode"""

    pursuit_buffer_time_s: Seconds = 1.0
    """Max seconds spent merging already-read packs into one in pursuit mode"""

    operation_timeout_s: Seconds = 30.0
    """Deadline (seconds) of one broker operation, retries included (Kafka, Pulsar)"""

    tick_interval_s: Seconds = 0.05
    """Interval (seconds) between time ticks"""

    stall_after_ticks: Annotated[float, Field(ge=0)] = 100.0
    """A TtMsgStream channel holding the common tick back this many tick intervals while
    others advance is reported as stalled (logged once, in stats and metrics); 0 disables"""


STREAM_DEFAULTS = MsgStreamConfig()
"""The ``msgstream`` section's defaults: what :class:`~msgstream.MsgStream` and
:class:`~msgstream.TtMsgStream` take for an option not given (their signatures read it),
so each default is declared once, on its key."""


def stream_option(key: str) -> str:
    """The stream keyword argument the ``msgstream`` key ``key`` sets: its name, less the
    ``tt_`` that marks, in this one flat section, an option of TtMsgStream alone
    (``tt_channel_buffer_size`` sets ``channel_buffer_size``)."""
    return key.removeprefix("tt_")


class MetricsConfig(Section):
    """Prometheus metrics (needs ``msgstream[metrics]``): see
    :mod:`msgstream.observability.metrics`."""

    SECTION: ClassVar[str] = "metrics"

    enabled: bool = False
    """Record Prometheus metrics in prometheus_client's default registry for the streams the
    factory makes (needs msgstream[metrics])"""

    port: Annotated[int | None, Field(ge=1, le=65535)] = None
    """When enabled, also serve /metrics over HTTP on this port"""


class TracingConfig(Section):
    """OpenTelemetry traces (needs ``msgstream[otel]``): see
    :mod:`msgstream.observability.tracing`."""

    SECTION: ClassVar[str] = "tracing"

    enabled: bool = False
    """Trace produce calls and consumed packs with OpenTelemetry, carrying W3C trace context
    in message properties (needs msgstream[otel]; nothing is recorded until the
    application configures an SDK)"""


# --------------------------------------------------------------------------- Config


class Config(FrozenModel):
    """The whole configuration. Build it with :func:`load_config` or :func:`config_from_dict`.

    Holds ``mq``, ``msgstream`` and one section per registered backend, reached as an
    attribute (``config.kafka``) or, typed, with :meth:`section` (``config.section(KafkaConfig)``).
    A section left out is its defaults.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    mq: MqConfig = Field(default_factory=lambda: MqConfig())
    msgstream: MsgStreamConfig = Field(default_factory=lambda: MsgStreamConfig())
    metrics: MetricsConfig = Field(default_factory=lambda: MetricsConfig())
    tracing: TracingConfig = Field(default_factory=lambda: TracingConfig())

    def __init__(self, **sections: Section) -> None:
        try:
            super().__init__(**sections)
        except ValidationError as exc:
            cause = (exc.errors()[0].get("ctx") or {}).get("error")
            if isinstance(cause, ConfigError):
                raise cause from None
            raise ConfigError(str(exc.errors()[0]["loc"][0]), "expected a section") from None

    @model_validator(mode="before")
    @classmethod
    def _backend_sections(cls, data: Any) -> Any:
        """Every registered backend's section (its defaults unless given); no other."""
        data = dict(data)
        classes = _section_classes()
        for name, value in data.items():
            if name not in classes:
                raise unknown_key(name, list(classes))
            if not isinstance(value, classes[name]):
                raise ConfigError(name, f"expected a {classes[name].__name__}")
        for name, section_cls in classes.items():
            if name not in data:
                data[name] = section_cls()
        return data

    def sections(self) -> dict[str, Section]:
        """Each section by name: ``mq``, ``msgstream``, then the backends'."""
        return {name: getattr(self, name) for name in _section_classes()}

    def section(self, section_cls: type[S]) -> S:
        """The section of class ``section_cls`` (a backend's: ``config.section(KafkaConfig)``)."""
        value = getattr(self, section_cls.SECTION, None)
        if not isinstance(value, section_cls):
            raise ConfigError(section_cls.SECTION, "no such section: is its backend registered?")
        return value

    def replace(self, **sections: Section) -> Self:
        """A copy with some sections replaced (``config.replace(mq=MqConfig(type="memory"))``)."""
        return type(self)(**{**self.sections(), **sections})

    def with_values(self, values: Mapping[str, Mapping[str, Any]]) -> Self:
        """A validated copy with some keys changed, given in the shape of the YAML file
        (``{"kafka": {"acks": "1"}}``); every other key keeps its value, secrets included."""
        sections = self.sections()
        for name, changes in values.items():
            if name not in sections:
                raise unknown_key(name, list(sections))
            if changes:
                sections[name] = sections[name].replace(**changes)
        return type(self)(**sections)

    def with_overrides(self, overrides: Mapping[str, object]) -> Self:
        """A validated copy with dotted keys changed (``{"kafka.acks": "1"}``: a CLI's
        ``--set``, a Spark option); a text value is read by :func:`text_value`. A key
        one level below a mapping key (``kafka.consumer.fetch_max_bytes``) sets that
        entry of the mapping and keeps its others (after the whole mapping, if that is
        overridden too); its text is read as YAML too, but for an entry whose name says
        it is a secret, which is its text as is. A key that names no section is a
        :class:`ConfigError` naming the key, never the value (it may be a secret)."""
        changes: dict[str, dict[str, Any]] = {}
        entries: list[tuple[str, str, str, object]] = []
        for key, value in overrides.items():
            section, name = split_key(key)
            head, dot, entry = name.partition(".")
            if dot and _is_mapping(section, head):
                entries.append((section, head, entry, value))
                continue
            changes.setdefault(section, {})[name] = (
                text_value(key, value) if isinstance(value, str) else value
            )
        for section, head, entry, value in entries:
            held = changes.setdefault(section, {})
            if head not in held:
                held[head] = dict(getattr(self.sections()[section], head))
            if isinstance(held[head], dict):  # else the whole key's own error, below
                held[head][entry] = (
                    _yaml_value(value)
                    if isinstance(value, str) and not names_a_secret(entry)
                    else value
                )
        return self.with_values(changes)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The effective configuration as plain data (the shape of the YAML file), each
        secret key's value masked: it can be shown, and cannot be fed back for a secret
        (:meth:`with_values` changes keys and keeps the secrets)."""
        return {name: section.model_dump(mode="json") for name, section in self.sections().items()}

    def backend(self) -> str:
        """Shorthand for :func:`resolve_backend`."""
        return resolve_backend(self)


def _section_classes() -> dict[str, type[Section]]:
    """Section name -> class: the core's, then each registered backend's."""
    classes: dict[str, type[Section]] = {
        "mq": MqConfig,
        "msgstream": MsgStreamConfig,
        "metrics": MetricsConfig,
        "tracing": TracingConfig,
    }
    classes.update((name, spec.section) for name, spec in backend_specs().items())
    return classes


def config_keys() -> Iterator[ConfigKey]:
    """Every key of every section, in the order of the reference and the example file."""
    notes = _selection_notes()
    for section_cls in _section_classes().values():
        for key in section_cls.keys().values():
            note = notes.get(key.dotted)
            yield key if note is None else dataclasses.replace(key, doc=f"{key.doc}; {note}")


def _selection_notes() -> dict[str, str]:
    """What setting each backend's address key does to ``mq.type: default``, by key: the
    one statement of the precedence, made from the specs (a backend's section names no
    other backend)."""
    notes: dict[str, str] = {}
    before: list[str] = []
    for spec in selecting_backends():
        key = f"{spec.name}.{spec.selected_by}"
        unless = f" (unless {' or '.join(before)} is set)" if before else ""
        notes[key] = f"setting it makes mq.type 'default' pick {spec.name}{unless}"
        before.append(key)
    return notes


def _env_map() -> dict[str, ConfigKey]:
    result: dict[str, ConfigKey] = {}
    for key in config_keys():
        if key.env_var in result:  # e.g. section "a_b" key "c" vs section "a" key "b_c"
            raise TypeError(f"{key.dotted} and {result[key.env_var].dotted} share an env var")
        result[key.env_var] = key
    return result


def split_key(key: str) -> tuple[str, str]:
    """A dotted key (``kafka.acks``) as (section, key in it); a :class:`ConfigError`
    naming ``key`` when it names no section. Whether the section has such a key is
    checked when the value is set."""
    section, _, name = key.partition(".")
    if not name or section not in _section_classes():
        raise ConfigError(
            key, "expected a dotted configuration key such as msgstream.tick_interval_s"
        )
    return section, name


def env_var_name(key: str) -> str:
    """The environment variable overriding a dotted key, e.g. ``MSGSTREAM_MQ_TYPE``."""
    keys = {k.dotted: k for k in config_keys()}
    if key not in keys:
        raise unknown_key(key, list(keys))
    return keys[key].env_var


def text_value(key: str, text: str) -> Any:
    """An override of dotted ``key`` given as text (a CLI ``--set``, a Spark option) as
    a value: read as YAML (``"true"`` is a bool, ``"{a: 1}"`` a mapping; text that is no
    YAML stays text), except a secret key's, which is its text as is (never parsed, so
    never echoed by a parser's error)."""
    if any(k.secret for k in config_keys() if k.dotted == key):
        return text
    return _yaml_value(text)


def _yaml_value(text: str) -> Any:
    """``text`` read as YAML, or as is when it is no YAML (never echoed by the parser)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _is_mapping(section: str, name: str) -> bool:
    """Whether ``section.name`` is a key whose value is a mapping (a pass-through map)."""
    return any(k.kind is dict for k in config_keys() if (k.section, k.name) == (section, name))


# --------------------------------------------------------------------------- environment

_SCALARS: dict[type, TypeAdapter[Any]] = {kind: TypeAdapter(kind) for kind in (int, float, bool)}
_MAPPING: TypeAdapter[Any] = TypeAdapter(dict[str, Any])


def _env_value(key: ConfigKey, var: str, text: str) -> Any:
    """An environment variable's text as a value of the key's type (validated later)."""
    stripped = text.strip()
    if key.optional and stripped.lower() in ("", "none", "null"):
        return None
    if key.kind is str:
        return stripped if key.choices else text
    try:
        if key.kind is dict:
            return _MAPPING.validate_json(stripped) if stripped else {}
        return _SCALARS[key.kind].validate_strings(stripped)
    except ValidationError as exc:
        expected = {
            bool: "a boolean (true/false, yes/no, on/off, 1/0)",
            dict: "a JSON object",
        }.get(key.kind, key.type_text())
        shown = repr(text)
        if key.may_hold_secret:  # a mapping that does not parse may hold a secret entry
            where = (exc.errors()[0].get("ctx") or {}).get("error")
            shown = f"{MASK} ({where})" if where else MASK
        raise ConfigError(
            key.dotted, f"invalid value {shown} in environment variable {var}: expected {expected}"
        ) from None


def _env_overrides(env: Mapping[str, str]) -> dict[str, tuple[ConfigKey, str, Any]]:
    """Dotted key -> (key, variable, value) for each ``MSGSTREAM_*`` variable in ``env``."""
    env_map = _env_map()
    found: dict[str, tuple[ConfigKey, str, Any]] = {}
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV_VAR:
            continue
        if var.startswith(_IGNORED_ENV_PREFIX):
            continue
        key = env_map.get(var)
        if key is None:
            # Compare without the shared prefix, or everything looks "close".
            n = len(ENV_PREFIX)
            close = difflib.get_close_matches(var[n:], [v[n:] for v in env_map], n=1)
            hint = f"; did you mean {ENV_PREFIX + close[0]!r}?" if close else ""
            raise ConfigError(var, f"unknown {ENV_PREFIX}* environment variable{hint}")
        found[key.dotted] = (key, var, _env_value(key, var, env[var]))
    return found


# --------------------------------------------------------------------------- loading


def config_from_dict(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Config:
    """Build a validated :class:`Config` from YAML-shaped data, then apply ``env`` overrides.

    ``env`` defaults to ``os.environ``; pass ``{}`` to ignore the environment. A section
    whose value is ``None`` (a YAML key with everything under it commented out) is empty.
    """
    if env is None:
        env = os.environ
    if not isinstance(data, Mapping):
        # Not shown: a document laid out wrong may hold any key's value, a secret too.
        shown = describe(data, secret=True)
        raise ConfigError("<root>", f"expected a mapping of sections, got {shown}")
    classes = _section_classes()
    values: dict[str, dict[str, Any]] = {name: {} for name in classes}
    for section_key, section_data in data.items():
        section = str(section_key)
        if section not in classes:
            raise unknown_key(section, list(classes))
        if section_data is None:
            continue
        if not isinstance(section_data, Mapping):
            secret = any(key.may_hold_secret for key in classes[section].keys().values())
            shown = describe(section_data, secret=secret)
            raise ConfigError(section, f"expected a mapping of keys, got {shown}")
        values[section].update((str(k), v) for k, v in section_data.items())
    overrides = _env_overrides(env)
    for key, _, value in overrides.values():
        values[key.section][key.name] = value
    sections: dict[str, Section] = {}
    for name, section_cls in classes.items():
        try:
            sections[name] = section_cls(**values[name])
        except ConfigError as exc:
            # The key, or the mapping an entry is in (kafka.producer.linger_ms), set by a variable.
            given = exc.key
            while given and given not in overrides:
                given = given.rpartition(".")[0]
            if not given:
                raise
            var = overrides[given][1]
            raise ConfigError(exc.key, f"{exc.problem} (from environment variable {var})") from None
    return Config(**sections)


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


# --------------------------------------------------------------------------- backends


def resolve_backend(cfg: Config) -> str:
    """The name of the backend ``cfg`` selects.

    ``mq.type: default`` picks, among the backends whose spec has ``selected_by``, the
    first (by ``selection_rank``) whose selecting key is set, else the ``fallback`` one.
    An explicitly named backend needs its ``required_keys`` set.
    """
    mq_type = cfg.mq.type
    if mq_type == "default":
        for spec in selecting_backends():
            if getattr(cfg.section(spec.section), str(spec.selected_by)) is not None:
                return spec.name
        fallback = fallback_backend()
        if fallback is None:
            raise ConfigError("mq.type", "'default' needs a key that selects a backend")
        return fallback.name
    try:
        spec = backend_spec(mq_type)
    except KeyError:
        raise ConfigError("mq.type", f"backend {mq_type!r} is no longer registered") from None
    _check_required(cfg, spec)
    return mq_type


def _check_required(cfg: Config, spec: BackendSpec) -> None:
    section = cfg.section(spec.section)
    for key in spec.required_keys:
        if getattr(section, key) is None:
            raise ConfigError(f"{spec.name}.{key}", f"required when mq.type is {spec.name}")


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
    for key in config_keys():
        cells = [
            f"`{key.dotted}`",
            f"`{key.env_var}`",
            key.type_text(),
            f"`{_yaml_scalar(key.default)}`",
            key.doc,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
