"""Tests of msgstream.configuration.config: loading, validation, env overrides, backend
resolution."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from helpers.docs_pages import generated_section
from msgstream.backends.kafka.settings import KafkaConfig
from msgstream.backends.pulsar.settings import PulsarConfig
from msgstream.backends.rocksmq.settings import RocksmqConfig, default_rocksmq_path
from msgstream.configuration.config import (
    Config,
    MqConfig,
    MsgStreamConfig,
    config_from_dict,
    config_reference_markdown,
    env_var_name,
    load_config,
    resolve_backend,
)
from msgstream.configuration.plugins import backend_names
from msgstream.errors import ConfigError

EXAMPLE_YAML = Path(__file__).resolve().parents[1] / "msgstream.yaml"

NO_ENV: dict[str, str] = {}


def write(tmp_path: Path, text: str, name: str = "msgstream.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def all_keys() -> list[str]:
    return [f"{s}.{k}" for s, keys in Config().to_dict().items() for k in keys]


# --------------------------------------------------------------------------- defaults


def test_defaults() -> None:
    cfg = load_config(env=NO_ENV)
    assert cfg == Config()
    assert cfg.mq.type == "default"
    m = cfg.msgstream
    assert m.receive_buffer_size == 1024
    assert m.tt_channel_buffer_size == 65536
    assert m.late_policy == "deliver"
    assert m.max_message_bytes == 67108864
    assert m.pursuit_lag_s == 10.0
    assert m.pursuit_buffer_size_bytes == 104857600
    assert m.pursuit_buffer_time_s == 1.0
    assert m.operation_timeout_s == 30.0
    assert m.tick_interval_s == 0.05
    r = cfg.rocksmq
    assert r.path is None
    assert r.sync is False
    assert r.page_size_bytes == 67108864
    assert r.retention_max_age_s == 259200.0
    assert r.retention_max_size_bytes == -1
    assert r.retention_check_interval_s == 60.0
    assert r.subscription_idle_expiry_s == 604800.0
    assert r.compaction_interval_s == 3600.0
    assert cfg.kafka.brokers is None
    assert cfg.kafka.client_id == "msgstream"
    assert cfg.pulsar.address is None
    assert cfg.pulsar.tenant == "public"
    assert cfg.pulsar.namespace == "default"
    assert cfg.memory.name == "default"


def test_config_is_frozen() -> None:
    cfg = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.mq = MqConfig(type="kafka")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.rocksmq.path = "/x"  # type: ignore[misc]


def test_to_dict_round_trips() -> None:
    cfg = config_from_dict(
        {"mq": {"type": "pulsar"}, "pulsar": {"address": "pulsar://h:6650"}}, env=NO_ENV
    )
    dumped = cfg.to_dict()
    assert dumped["mq"] == {"type": "pulsar"}
    assert dumped["pulsar"]["address"] == "pulsar://h:6650"
    assert config_from_dict(dumped, env=NO_ENV) == cfg
    assert yaml.safe_load(yaml.safe_dump(dumped)) == dumped


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError) as exc:
        RocksmqConfig(page_size_bytes=0)
    assert exc.value.key == "rocksmq.page_size_bytes"
    with pytest.raises(ConfigError) as exc:
        MqConfig(type="rabbit")  # type: ignore[arg-type]
    assert exc.value.key == "mq.type"


def test_int_accepted_for_float_and_normalised() -> None:
    cfg = config_from_dict({"msgstream": {"pursuit_lag_s": 3}}, env=NO_ENV)
    assert cfg.msgstream.pursuit_lag_s == 3.0
    assert isinstance(cfg.msgstream.pursuit_lag_s, float)


# --------------------------------------------------------------------------- YAML files


def test_yaml_file_loading(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
mq:
  type: kafka
msgstream:
  receive_buffer_size: 16
  late_policy: reject
rocksmq:
  sync: true
  retention_max_age_s: -1
kafka:
  brokers: "k1:9092,k2:9092"
""",
    )
    cfg = load_config(path, env=NO_ENV)
    assert cfg.mq.type == "kafka"
    assert cfg.msgstream.receive_buffer_size == 16
    assert cfg.msgstream.late_policy == "reject"
    assert cfg.msgstream.tt_channel_buffer_size == 65536  # untouched default
    assert cfg.rocksmq.sync is True
    assert cfg.rocksmq.retention_max_age_s == -1.0
    assert cfg.kafka.brokers == "k1:9092,k2:9092"
    assert resolve_backend(cfg) == "kafka"
    assert load_config(str(path), env=NO_ENV) == cfg


def test_empty_file_and_empty_section_mean_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), env=NO_ENV) == Config()
    assert load_config(write(tmp_path, "kafka:\n", "b.yaml"), env=NO_ENV) == Config()


def test_config_path_from_env(tmp_path: Path) -> None:
    path = write(tmp_path, "memory:\n  name: shared\n")
    cfg = load_config(env={"MSGSTREAM_CONFIG": str(path)})
    assert cfg.memory.name == "shared"
    assert load_config(env={"MSGSTREAM_CONFIG": ""}) == Config()


def test_explicit_path_beats_config_env(tmp_path: Path) -> None:
    a = write(tmp_path, "memory:\n  name: a\n", "a.yaml")
    b = write(tmp_path, "memory:\n  name: b\n", "b.yaml")
    assert load_config(a, env={"MSGSTREAM_CONFIG": str(b)}).memory.name == "a"


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as exc:
        load_config(missing, env=NO_ENV)
    assert exc.value.key == "<file>"
    assert str(missing) in str(exc.value)
    assert "cannot read" in exc.value.problem


def test_missing_file_named_by_env(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as exc:
        load_config(env={"MSGSTREAM_CONFIG": str(missing)})
    assert exc.value.key == "<file>"
    assert str(missing) in exc.value.problem


def test_unreadable_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path, env=NO_ENV)
    assert exc.value.key == "<file>"
    assert str(tmp_path) in exc.value.problem


def test_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "mq:\n  type: [unclosed\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path, env=NO_ENV)
    assert exc.value.key == "<file>"
    assert "invalid YAML" in exc.value.problem
    assert str(path) in exc.value.problem


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_document(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config(path, env=NO_ENV)
    assert exc.value.key == "<file>"
    assert "expected a mapping" in exc.value.problem


def test_non_mapping_dict_root() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict(["mq"], env=NO_ENV)  # type: ignore[arg-type]
    assert exc.value.key == "<root>"


@pytest.mark.parametrize("value", [["x"], "rocksmq", 3])
def test_non_mapping_section(value: Any) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"rocksmq": value}, env=NO_ENV)
    assert exc.value.key == "rocksmq"
    assert "expected a mapping" in exc.value.problem


def test_example_yaml_loads_and_equals_defaults() -> None:
    cfg = load_config(EXAMPLE_YAML, env=NO_ENV)
    # The example sets every key to its default value.
    assert cfg == Config()
    assert cfg.rocksmq.path is None


def test_example_yaml_documents_every_key() -> None:
    text = EXAMPLE_YAML.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    listed = [f"{s}.{k}" for s, keys in data.items() for k in keys]
    assert listed == all_keys()
    # Each key line is directly preceded by a comment line.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.lstrip().startswith("#"):
            assert lines[i - 1].lstrip().startswith("#"), f"undocumented: {line!r}"


# --------------------------------------------------------------------------- unknown keys


def test_unknown_key_with_suggestion() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"rocksmq": {"pth": "/data"}}, env=NO_ENV)
    assert exc.value.key == "rocksmq.pth"
    assert exc.value.problem == "unknown key; did you mean 'rocksmq.path'?"
    assert str(exc.value) == "config key 'rocksmq.pth': unknown key; did you mean 'rocksmq.path'?"


def test_unknown_section_with_suggestion() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"rocksdb": {}}, env=NO_ENV)
    assert exc.value.key == "rocksdb"
    assert exc.value.problem == "unknown key; did you mean 'rocksmq'?"


def test_unknown_key_without_close_match_lists_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"zzzzzz": 1}}, env=NO_ENV)
    assert exc.value.key == "kafka.zzzzzz"
    assert "did you mean" not in exc.value.problem
    assert "kafka.brokers" in exc.value.problem


def test_unknown_key_in_yaml_file(tmp_path: Path) -> None:
    path = write(tmp_path, "msgstream:\n  recieve_buffer_size: 8\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path, env=NO_ENV)
    assert exc.value.key == "msgstream.recieve_buffer_size"
    assert "did you mean 'msgstream.receive_buffer_size'?" in exc.value.problem


# --------------------------------------------------------------------------- wrong values


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"msgstream": {"receive_buffer_size": "1024"}}, "msgstream.receive_buffer_size", "'1024'"),
        ({"msgstream": {"receive_buffer_size": 1.5}}, "msgstream.receive_buffer_size", "1.5"),
        ({"msgstream": {"pursuit_lag_s": "fast"}}, "msgstream.pursuit_lag_s", "'fast'"),
        ({"msgstream": {"pursuit_lag_s": True}}, "msgstream.pursuit_lag_s", "True"),
        ({"rocksmq": {"sync": "yes"}}, "rocksmq.sync", "'yes'"),
        ({"rocksmq": {"sync": 1}}, "rocksmq.sync", "1"),
        ({"rocksmq": {"path": 5}}, "rocksmq.path", "5"),
        ({"kafka": {"client_id": None}}, "kafka.client_id", "null"),
        ({"kafka": {"client_id": ""}}, "kafka.client_id", "empty"),
        ({"msgstream": {"tick_interval_s": float("nan")}}, "msgstream.tick_interval_s", "nan"),
        ({"msgstream": {"tick_interval_s": float("inf")}}, "msgstream.tick_interval_s", "inf"),
    ],
)
def test_wrong_types(data: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data, env=NO_ENV)
    assert exc.value.key == key
    assert fragment in exc.value.problem
    assert f"config key {key!r}" in str(exc.value)


@pytest.mark.parametrize("value", [True, False])
def test_bool_rejected_for_int(value: bool) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"msgstream": {"max_message_bytes": value}}, env=NO_ENV)
    assert exc.value.key == "msgstream.max_message_bytes"
    assert exc.value.problem == f"expected an integer, got {value!r} (bool)"


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("msgstream", "receive_buffer_size", 0),
        ("msgstream", "tt_channel_buffer_size", -5),
        ("msgstream", "max_message_bytes", 0),
        ("msgstream", "pursuit_lag_s", -0.5),
        ("msgstream", "pursuit_buffer_size_bytes", 0),
        ("msgstream", "pursuit_buffer_time_s", 0),
        ("msgstream", "operation_timeout_s", 0.0),
        ("msgstream", "tick_interval_s", -1),
        ("rocksmq", "page_size_bytes", 0),
        ("rocksmq", "retention_max_age_s", -2),
        ("rocksmq", "retention_max_size_bytes", -3),
        ("rocksmq", "retention_check_interval_s", 0),
        ("rocksmq", "subscription_idle_expiry_s", -0.5),
        ("rocksmq", "compaction_interval_s", 0),
    ],
)
def test_out_of_range(section: str, key: str, value: float) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({section: {key: value}}, env=NO_ENV)
    assert exc.value.key == f"{section}.{key}"
    assert "out of range" in exc.value.problem
    assert repr(value) in exc.value.problem


def test_range_boundaries_and_special_values_accepted() -> None:
    cfg = config_from_dict(
        {
            "msgstream": {"receive_buffer_size": 1, "pursuit_lag_s": 0},
            "rocksmq": {
                "retention_max_age_s": 0,
                "retention_max_size_bytes": -1,
                "subscription_idle_expiry_s": -1,
            },
        },
        env=NO_ENV,
    )
    assert cfg.msgstream.receive_buffer_size == 1
    assert cfg.msgstream.pursuit_lag_s == 0.0
    assert cfg.rocksmq.retention_max_age_s == 0.0
    assert cfg.rocksmq.subscription_idle_expiry_s == -1.0


def test_bad_mq_type_names_key() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"mq": {"type": "kafak"}}, env=NO_ENV)
    assert exc.value.key == "mq.type"
    assert "'kafak'" in exc.value.problem
    assert "'default', 'rocksmq', 'kafka', 'pulsar', 'memory'" in exc.value.problem
    assert "did you mean 'kafka'?" in exc.value.problem


def test_bad_late_policy_names_key() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"msgstream": {"late_policy": "drop"}}, env=NO_ENV)
    assert exc.value.key == "msgstream.late_policy"
    assert "'drop'" in exc.value.problem
    assert "'deliver', 'reject'" in exc.value.problem


def test_enum_value_must_be_string() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"mq": {"type": 1}}, env=NO_ENV)
    assert exc.value.key == "mq.type"


def test_empty_optional_string_means_unset() -> None:
    cfg = config_from_dict({"kafka": {"brokers": ""}}, env=NO_ENV)
    assert cfg.kafka.brokers is None


# --------------------------------------------------------------------------- environment


def test_env_overrides_every_type(tmp_path: Path) -> None:
    path = write(tmp_path, "msgstream:\n  receive_buffer_size: 16\nrocksmq:\n  path: /from/yaml\n")
    env = {
        "MSGSTREAM_MQ_TYPE": "pulsar",
        "MSGSTREAM_MSGSTREAM_RECEIVE_BUFFER_SIZE": "32",
        "MSGSTREAM_MSGSTREAM_PURSUIT_LAG_S": "2.5",
        "MSGSTREAM_MSGSTREAM_LATE_POLICY": "reject",
        "MSGSTREAM_ROCKSMQ_PATH": "/from/env",
        "MSGSTREAM_ROCKSMQ_SYNC": "YES",
        "MSGSTREAM_PULSAR_ADDRESS": "pulsar://p:6650",
    }
    cfg = load_config(path, env=env)
    assert cfg.mq.type == "pulsar"
    assert cfg.msgstream.receive_buffer_size == 32  # env beats YAML
    assert cfg.msgstream.pursuit_lag_s == 2.5
    assert cfg.msgstream.late_policy == "reject"
    assert cfg.rocksmq.path == "/from/env"
    assert cfg.rocksmq.sync is True
    assert cfg.pulsar.address == "pulsar://p:6650"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("True", True),
        ("1", True),
        ("yes", True),
        ("YES", True),
        ("false", False),
        ("FALSE", False),
        ("0", False),
        ("no", False),
        ("No", False),
    ],
)
def test_env_bool_parsing(text: str, expected: bool) -> None:
    cfg = config_from_dict({}, env={"MSGSTREAM_ROCKSMQ_SYNC": text})
    assert cfg.rocksmq.sync is expected


@pytest.mark.parametrize("text", ["none", "None", "NONE", ""])
def test_env_none_clears_optional_string(text: str) -> None:
    cfg = config_from_dict(
        {"rocksmq": {"path": "/from/dict"}}, env={"MSGSTREAM_ROCKSMQ_PATH": text}
    )
    assert cfg.rocksmq.path is None


def test_env_int_accepted_for_float() -> None:
    cfg = config_from_dict({}, env={"MSGSTREAM_ROCKSMQ_RETENTION_MAX_AGE_S": "-1"})
    assert cfg.rocksmq.retention_max_age_s == -1.0


@pytest.mark.parametrize(
    ("var", "text", "key"),
    [
        ("MSGSTREAM_MSGSTREAM_RECEIVE_BUFFER_SIZE", "lots", "msgstream.receive_buffer_size"),
        ("MSGSTREAM_MSGSTREAM_RECEIVE_BUFFER_SIZE", "true", "msgstream.receive_buffer_size"),
        ("MSGSTREAM_MSGSTREAM_RECEIVE_BUFFER_SIZE", "1.5", "msgstream.receive_buffer_size"),
        ("MSGSTREAM_MSGSTREAM_PURSUIT_LAG_S", "soon", "msgstream.pursuit_lag_s"),
        ("MSGSTREAM_ROCKSMQ_SYNC", "maybe", "rocksmq.sync"),
    ],
)
def test_env_unparseable_value(var: str, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({}, env={var: text})
    assert exc.value.key == key
    assert repr(text) in exc.value.problem
    assert var in exc.value.problem


def test_env_out_of_range_names_key_and_var() -> None:
    var = "MSGSTREAM_ROCKSMQ_PAGE_SIZE_BYTES"
    with pytest.raises(ConfigError) as exc:
        config_from_dict({}, env={var: "0"})
    assert exc.value.key == "rocksmq.page_size_bytes"
    assert "out of range" in exc.value.problem
    assert var in exc.value.problem


def test_env_bad_enum() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({}, env={"MSGSTREAM_MQ_TYPE": "rabbitmq"})
    assert exc.value.key == "mq.type"
    assert "'rabbitmq'" in exc.value.problem


def test_unknown_msgstream_env_var_rejected() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({}, env={"MSGSTREAM_ROCKSMQ_PAHT": "/x"})
    assert exc.value.key == "MSGSTREAM_ROCKSMQ_PAHT"
    assert "unknown" in exc.value.problem
    assert "did you mean 'MSGSTREAM_ROCKSMQ_PATH'?" in exc.value.problem


def test_unknown_env_var_without_close_match() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({}, env={"MSGSTREAM_QQQ": "1"})
    assert exc.value.key == "MSGSTREAM_QQQ"
    assert "did you mean" not in exc.value.problem


def test_ignored_env_vars() -> None:
    env = {
        "MSGSTREAM_TEST_X": "anything",
        "MSGSTREAM_TEST_KAFKA_BROKERS": "k:9092",
        "MSGSTREAM_CONFIG": "",
        "HOME": "/home/x",
        "msgstream_lowercase": "ignored",
    }
    assert config_from_dict({}, env=env) == Config()


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSGSTREAM_CONFIG", raising=False)
    monkeypatch.setenv("MSGSTREAM_MEMORY_NAME", "from-os-environ")
    assert load_config().memory.name == "from-os-environ"
    assert config_from_dict({}).memory.name == "from-os-environ"


def test_env_var_names() -> None:
    assert env_var_name("rocksmq.path") == "MSGSTREAM_ROCKSMQ_PATH"
    assert env_var_name("mq.type") == "MSGSTREAM_MQ_TYPE"
    assert (
        env_var_name("msgstream.receive_buffer_size") == "MSGSTREAM_MSGSTREAM_RECEIVE_BUFFER_SIZE"
    )
    names = [env_var_name(k) for k in all_keys()]
    assert len(set(names)) == len(names)
    with pytest.raises(ConfigError) as exc:
        env_var_name("rocksmq.pth")
    assert exc.value.key == "rocksmq.pth"


def test_every_key_settable_from_env() -> None:
    """Each key's default, written as the env would hold it, parses back to itself."""
    env = {}
    for key in all_keys():
        section, name = key.split(".")
        value = Config().to_dict()[section][name]
        env[env_var_name(key)] = "none" if value is None else str(value)
    assert config_from_dict({}, env=env) == Config()


# --------------------------------------------------------------------------- resolve_backend


@pytest.mark.parametrize(
    ("rocksmq_path", "pulsar_address", "kafka_brokers", "expected"),
    [
        ("/data/rmq", "pulsar://p:6650", "k:9092", "rocksmq"),
        ("/data/rmq", None, None, "rocksmq"),
        ("/data/rmq", None, "k:9092", "rocksmq"),
        (None, "pulsar://p:6650", "k:9092", "pulsar"),
        (None, "pulsar://p:6650", None, "pulsar"),
        (None, None, "k:9092", "kafka"),
        (None, None, None, "rocksmq"),
    ],
)
def test_resolve_backend_default_precedence(
    rocksmq_path: str | None, pulsar_address: str | None, kafka_brokers: str | None, expected: str
) -> None:
    cfg = Config(
        rocksmq=RocksmqConfig(path=rocksmq_path),
        pulsar=PulsarConfig(address=pulsar_address),
        kafka=KafkaConfig(brokers=kafka_brokers),
    )
    assert cfg.mq.type == "default"
    assert resolve_backend(cfg) == expected
    assert cfg.backend() == expected


def test_resolve_backend_from_env() -> None:
    env = {"MSGSTREAM_KAFKA_BROKERS": "k:9092", "MSGSTREAM_PULSAR_ADDRESS": "pulsar://p:6650"}
    assert resolve_backend(load_config(env=env)) == "pulsar"


@pytest.mark.parametrize("backend", ["rocksmq", "memory"])
def test_resolve_backend_explicit(backend: str) -> None:
    cfg = config_from_dict(
        {"mq": {"type": backend}, "kafka": {"brokers": "k:9092"}, "pulsar": {"address": "p"}},
        env=NO_ENV,
    )
    assert resolve_backend(cfg) == backend
    assert backend in backend_names()


def test_resolve_backend_explicit_kafka_and_pulsar() -> None:
    cfg = config_from_dict(
        {"mq": {"type": "kafka"}, "kafka": {"brokers": "k:9092"}, "rocksmq": {"path": "/x"}},
        env=NO_ENV,
    )
    assert resolve_backend(cfg) == "kafka"
    cfg = config_from_dict(
        {"mq": {"type": "pulsar"}, "pulsar": {"address": "pulsar://p:6650"}}, env=NO_ENV
    )
    assert resolve_backend(cfg) == "pulsar"


def test_resolve_backend_kafka_requires_brokers() -> None:
    cfg = config_from_dict({"mq": {"type": "kafka"}}, env=NO_ENV)
    with pytest.raises(ConfigError) as exc:
        resolve_backend(cfg)
    assert exc.value.key == "kafka.brokers"
    assert exc.value.problem == "required when mq.type is kafka"


def test_resolve_backend_pulsar_requires_address() -> None:
    cfg = config_from_dict({"mq": {"type": "pulsar"}}, env=NO_ENV)
    with pytest.raises(ConfigError) as exc:
        resolve_backend(cfg)
    assert exc.value.key == "pulsar.address"
    assert exc.value.problem == "required when mq.type is pulsar"


# --------------------------------------------------------------------------- rocksmq path


def test_default_rocksmq_path_xdg(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path)}
    assert default_rocksmq_path(env) == str(tmp_path / "msgstream" / "rocksmq")


@pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
def test_default_rocksmq_path_fallback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str | None
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {} if xdg is None else {"XDG_DATA_HOME": xdg}
    expected = str(tmp_path / ".local" / "share" / "msgstream" / "rocksmq")
    assert default_rocksmq_path(env) == expected


def test_default_rocksmq_path_uses_os_environ(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_rocksmq_path() == str(tmp_path / "msgstream" / "rocksmq")


def test_effective_rocksmq_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path)}
    assert Config().rocksmq.resolved_path(env) == str(tmp_path / "msgstream" / "rocksmq")
    assert Config().rocksmq.resolved_path(env) == str(tmp_path / "msgstream" / "rocksmq")
    cfg = Config(rocksmq=RocksmqConfig(path="/srv/rmq"))
    assert cfg.rocksmq.resolved_path(env) == "/srv/rmq"
    monkeypatch.setenv("HOME", str(tmp_path))
    rmq = Config(rocksmq=RocksmqConfig(path="~/rmq")).rocksmq
    assert rmq.resolved_path() == str(tmp_path / "rmq")


# --------------------------------------------------------------------------- documentation


def test_reference_markdown_lists_every_key() -> None:
    md = config_reference_markdown()
    lines = md.strip().splitlines()
    assert lines[0] == "| Key | Environment variable | Type | Default | Description |"
    rows = lines[2:]
    assert len(rows) == len(all_keys())
    for key, row in zip(all_keys(), rows, strict=True):
        assert row.startswith(f"| `{key}` | `{env_var_name(key)}` |")
        assert row.count(" | ") == 4  # five cells, no stray unescaped pipes
    assert "| `rocksmq.path` | `MSGSTREAM_ROCKSMQ_PATH` | str or null | `null` |" in md
    assert "int >= 1 | `1024` |" in md
    assert "or -1 (keep forever)" in md
    assert "one of default, rocksmq, kafka, pulsar, memory" in md


def test_sections_are_declared_generically() -> None:
    """Every section field carries a description, so docs and env mapping stay complete."""
    for name, section in Config().sections().items():
        section_cls = type(section)
        assert name == section_cls.SECTION
        for key, info in section_cls.model_fields.items():
            assert info.description, f"{name}.{key} lacks a description"
    assert isinstance(Config().msgstream, MsgStreamConfig)


def test_the_docs_configuration_reference_is_current() -> None:
    section = generated_section("guide/configuration.md", "config-reference")
    assert section == config_reference_markdown().strip()


# --------------------------------------------------------------------------- kafka section


def test_kafka_sasl_username_without_password_names_both_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"sasl_username": "alice"}}, env=NO_ENV)
    assert exc.value.key == "kafka.sasl_username, kafka.sasl_password"
    assert "kafka.sasl_username is set but kafka.sasl_password is not" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"sasl_password": "secret"}}, env=NO_ENV)
    assert "kafka.sasl_password is set but kafka.sasl_username is not" in str(exc.value)


def test_kafka_sasl_protocol_needs_credentials() -> None:
    with pytest.raises(ConfigError, match=r"required when kafka\.security_protocol is SASL_SSL"):
        config_from_dict({"kafka": {"security_protocol": "SASL_SSL"}}, env=NO_ENV)


def test_kafka_client_certificate_needs_its_key() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"ssl_certfile": "/c.pem"}}, env=NO_ENV)
    assert exc.value.key == "kafka.ssl_certfile, kafka.ssl_keyfile"


def test_kafka_pass_through_maps_from_yaml_and_env() -> None:
    cfg = config_from_dict(
        {"kafka": {"producer": {"max_batch_size": 65536}, "consumer": None}},
        env={"MSGSTREAM_KAFKA_TOPIC_CONFIG": '{"retention.ms": "1000"}'},
    )
    assert cfg.kafka.producer == {"max_batch_size": 65536}
    assert cfg.kafka.consumer == {}
    assert cfg.kafka.topic_config == {"retention.ms": "1000"}


def test_kafka_pass_through_map_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"producer": ["linger"]}}, env=NO_ENV)
    assert exc.value.key == "kafka.producer"
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"producer": {"nested": {"a": 1}}}}, env=NO_ENV)
    assert exc.value.key == "kafka.producer.nested"
    with pytest.raises(ConfigError, match="MSGSTREAM_KAFKA_CONSUMER") as exc:
        config_from_dict({}, env={"MSGSTREAM_KAFKA_CONSUMER": "{not json"})
    assert "a JSON object" in str(exc.value)


def test_kafka_choices_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.compression"):
        config_from_dict({"kafka": {"compression": "brotli"}}, env=NO_ENV)
    with pytest.raises(ConfigError, match=r"kafka\.acks"):
        config_from_dict({"kafka": {"acks": 2}}, env=NO_ENV)
    # YAML reads `acks: 1` as an integer; it means the choice "1".
    assert config_from_dict({"kafka": {"acks": 1}}, env=NO_ENV).kafka.acks == "1"


@pytest.mark.parametrize(
    "text",
    [
        "mq:\n  type: " + "[" * 600 + "]" * 600 + "\n",
        "".join("  " * i + "k:\n" for i in range(600)),
    ],
)
def test_yaml_nested_too_deeply_is_a_config_error(tmp_path: Path, text: str) -> None:
    """Found by fuzzing: PyYAML parses recursively and raised RecursionError (600 levels
    exceed Python's default limit of 1000 frames, set here: a process may have raised it)."""
    path = write(tmp_path, text)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(ConfigError) as info:
            load_config(path, env={})
    finally:
        sys.setrecursionlimit(limit)
    assert info.value.key == "<file>"
    assert str(info.value) == f"config key '<file>': {path} nests collections too deeply"


@pytest.mark.parametrize(("section", "key"), [("mq", "type"), ("msgstream", "receive_buffer_size")])
def test_a_deeply_nested_value_is_described_briefly(section: str, key: str) -> None:
    value: Any = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(ConfigError) as info:
        config_from_dict({section: {key: value}}, env={})
    assert info.value.key == f"{section}.{key}"
    assert "[[[[...]]]]" in info.value.problem
    assert len(str(info.value)) < 300


# ---------------------------------------------------------------- kafka.client confluent


def test_kafka_client_defaults_to_aiokafka_and_takes_confluent() -> None:
    assert config_from_dict({}, env=NO_ENV).kafka.client == "aiokafka"
    cfg = config_from_dict({"kafka": {"client": "confluent"}}, env=NO_ENV)
    assert cfg.kafka.client == "confluent"
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"client": "librdkafka"}}, env=NO_ENV)
    assert exc.value.key == "kafka.client"


@pytest.mark.parametrize(
    ("properties", "key", "fragment"),
    [
        ({"no.such.property": 1}, "kafka.confluent.no.such.property", "No such configuration"),
        ({"batch.size": 1000, "linger.ms": "soon"}, "kafka.confluent.linger.ms", "Invalid value"),
        (
            {"batch.size": 1000, "socket.timeout.ms": -5},
            "kafka.confluent.socket.timeout.ms",
            "range",
        ),
        ({"group.id": "mine"}, "kafka.confluent.group.id", "set by msgstream"),
        ({"bootstrap.servers": "x:1"}, "kafka.confluent.bootstrap.servers", "set by msgstream"),
    ],
)
def test_librdkafka_properties_are_checked_at_load_naming_the_key(
    properties: dict[str, Any], key: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"kafka": {"confluent": properties}}, env=NO_ENV)
    assert exc.value.key == key
    assert fragment in exc.value.problem


def test_good_librdkafka_properties_load_and_reach_both_clients() -> None:
    from msgstream.backends.kafka.settings import librdkafka_consumer, librdkafka_producer

    cfg = config_from_dict(
        {
            "kafka": {
                "brokers": "k1:9092, k2:9092",
                "client": "confluent",
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": "u",
                "sasl_password": "p",
                "ssl_cafile": "/ca.pem",
                "ssl_check_hostname": False,
                "linger_ms": 2,
                "confluent": {"batch.size": 1000000, "enable.idempotence": True},
            }
        },
        env=NO_ENV,
    )
    producer = librdkafka_producer(cfg.kafka)
    assert producer["bootstrap.servers"] == "k1:9092,k2:9092"
    assert producer["security.protocol"] == "sasl_ssl"
    assert producer["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (producer["sasl.username"], producer["sasl.password"]) == ("u", "p")
    assert producer["ssl.ca.location"] == "/ca.pem"
    assert producer["ssl.endpoint.identification.algorithm"] == "none"
    assert (producer["linger.ms"], producer["batch.size"]) == (2, 1000000)
    consumer = librdkafka_consumer(cfg.kafka, "sub")
    assert (consumer["group.id"], consumer["enable.auto.commit"]) == ("sub", False)
    assert consumer["enable.idempotence"] is True
    assert consumer["queued.max.messages.kbytes"] == 4096
    assert consumer["fetch.queue.backoff.ms"] == 10  # librdkafka's 1 s stalled every refill


@pytest.mark.parametrize(
    ("kafka", "kbytes"),
    [
        ({}, 4096),  # PREFETCH_BYTES, not librdkafka's 64 MiB
        ({"max_request_size": 16 * 1024 * 1024}, 16384),  # at least one fetch
        ({"confluent": {"queued.max.messages.kbytes": 100}}, 100),  # the user's word last
    ],
)
def test_what_a_confluent_reader_fetches_ahead_is_bounded(
    kafka: dict[str, Any], kbytes: int
) -> None:
    from msgstream.backends.kafka.settings import librdkafka_consumer

    cfg = config_from_dict(
        {"kafka": {"brokers": "k:9092", "client": "confluent", **kafka}}, env=NO_ENV
    )
    assert librdkafka_consumer(cfg.kafka, "sub")["queued.max.messages.kbytes"] == kbytes


@pytest.mark.parametrize(
    ("section", "key", "meaning"),
    [
        ("rocksmq", "retention_max_age_s", "keep forever"),
        ("rocksmq", "retention_max_size_bytes", "unlimited"),
        ("rocksmq", "subscription_idle_expiry_s", "never"),
        ("kafka", "replication_factor", "broker default"),
    ],
)
def test_every_special_value_is_accepted_outside_the_range(
    section: str, key: str, meaning: str
) -> None:
    """-1 passes although the range excludes it, on every key that declares it; the value
    next to it does not (the order of the constraints in a key's type decides this)."""
    cfg = config_from_dict({section: {key: -1}}, env={})
    assert getattr(cfg.section(type(getattr(cfg, section))), key) == -1
    with pytest.raises(ConfigError) as caught:
        config_from_dict({section: {key: -2}}, env={})
    assert f"or -1 ({meaning})" in str(caught.value)


# --------------------------------------------------------------------------- dotted overrides


def test_dotted_overrides_are_read_by_the_keys_type() -> None:
    """Text is read as YAML (then validated by the key's type), other values as they are;
    every other key keeps its value."""
    base = config_from_dict({"kafka": {"brokers": "k:9092", "acks": "all"}}, env=NO_ENV)
    changed = base.with_overrides(
        {"kafka.acks": "1", "msgstream.receive_buffer_size": "7", "msgstream.pursuit_lag_s": 2}
    )
    assert (changed.kafka.acks, changed.kafka.brokers) == ("1", "k:9092")
    assert changed.msgstream.receive_buffer_size == 7
    assert changed.msgstream.pursuit_lag_s == 2.0
    assert base.with_overrides({}) == base


@pytest.mark.parametrize("key", ["kafka", "kafkaa.acks", ".acks", "acks"])
def test_a_dotted_override_that_names_no_section_names_the_key(key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Config().with_overrides({key: "secret-looking"})
    assert (exc.value.key, exc.value.problem) == (
        key,
        "expected a dotted configuration key such as msgstream.tick_interval_s",
    )
    assert "secret-looking" not in str(exc.value)


def test_a_dotted_override_of_an_unknown_key_in_a_section_names_it() -> None:
    with pytest.raises(ConfigError) as exc:
        Config().with_overrides({"kafka.ackz": "1"})
    assert exc.value.key == "kafka.ackz"


def test_a_key_below_a_mapping_sets_one_entry_and_keeps_the_others() -> None:
    """``kafka.consumer.max_partition_fetch_bytes`` (a Spark option, a ``--set``) is one
    entry of the pass-through map; librdkafka's dotted property names are entries too."""
    base = config_from_dict(
        {"kafka": {"brokers": "k:9092", "consumer": {"fetch_max_bytes": 1}}}, env=NO_ENV
    )
    changed = base.with_overrides(
        {
            "kafka.consumer.max_partition_fetch_bytes": "1048576",
            "kafka.confluent.linger.ms": "5",
            "kafka.confluent.client.rack": "r1",
        }
    )
    assert changed.kafka.consumer == {"fetch_max_bytes": 1, "max_partition_fetch_bytes": 1048576}
    assert changed.kafka.confluent == {"linger.ms": 5, "client.rack": "r1"}
    assert base.kafka.consumer == {"fetch_max_bytes": 1}


@pytest.mark.parametrize("sub_key_first", [True, False])
def test_a_key_below_a_mapping_adds_to_the_mapping_overridden_whole(sub_key_first: bool) -> None:
    whole = ("kafka.consumer", "{fetch_max_bytes: 2}")
    entry = ("kafka.consumer.check_crcs", "false")
    pairs = [entry, whole] if sub_key_first else [whole, entry]
    base = config_from_dict({"kafka": {"consumer": {"fetch_max_bytes": 1, "x": 3}}}, env=NO_ENV)
    changed = base.with_overrides(dict(pairs))
    assert changed.kafka.consumer == {"fetch_max_bytes": 2, "check_crcs": False}


def test_an_entry_named_like_a_secret_keeps_its_text_unread_and_unshown() -> None:
    changed = Config().with_overrides({"kafka.confluent.sasl.password": "0123"})
    secret = changed.kafka.confluent["sasl.password"]
    assert isinstance(secret, SecretStr)
    assert secret.get_secret_value() == "0123"  # not YAML's octal 83
    assert "0123" not in repr(changed) and "0123" not in str(changed.to_dict())


def test_a_key_below_a_key_that_is_no_mapping_is_unknown_and_named() -> None:
    with pytest.raises(ConfigError) as exc:
        Config().with_overrides({"kafka.acks.x": "secret-looking"})
    assert exc.value.key == "kafka.acks.x"
    assert "secret-looking" not in str(exc.value)
