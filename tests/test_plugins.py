"""Backends as plug-ins: found through entry points, registered in-process, configured by
their own sections; the core names none of them."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from msgstream import BackendUnavailableError, Config, config_from_dict, new_client
from msgstream.configuration.config import config_reference_markdown, resolve_backend
from msgstream.configuration.plugins import (
    ENTRY_POINT_GROUP,
    BackendSpec,
    backend_names,
    backend_spec,
    register_backend,
)
from msgstream.contract.backend import tagged_id_owner
from msgstream.errors import ConfigError
from plugin_backend import SPEC, TinyLogConfig, plugged_in

SRC = Path(__file__).resolve().parent.parent / "src" / "msgstream"


def test_the_built_in_backends_are_found_through_entry_points() -> None:
    points = {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}
    assert {"rocksmq", "kafka", "pulsar", "memory"} <= set(points)
    for name, point in points.items():
        assert backend_spec(name) is point.load()
    assert backend_names()[:4] == ("rocksmq", "kafka", "pulsar", "memory")


def test_loading_every_spec_imports_no_broker_or_store_library() -> None:
    probe = (
        "import sys\n"
        "from msgstream import Config\n"
        "from msgstream.configuration.config import config_reference_markdown\n"
        "from msgstream.configuration.plugins import backend_specs\n"
        "backend_specs(); Config(); config_reference_markdown()\n"
        "heavy = ('aiokafka', 'pulsar', '_pulsar', 'rocksdict', 'pyspark')\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_the_core_names_no_backend() -> None:
    """Backends are named in documentation at most (docstrings, a key's description),
    never in the core's code. (The CLI's commands are being moved out of the core.)"""
    for path in sorted(SRC.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        documentation = {  # docstrings, attribute docstrings and keys' descriptions
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr)
            or (isinstance(node, ast.keyword) and node.arg == "description")
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) in documentation:
                    continue
                for name in ("kafka", "pulsar", "rocksmq"):
                    assert name not in node.value.lower(), f"{path.name}: {node.value!r}"


def test_a_registered_backend_is_a_choice_of_mq_type_with_its_own_section() -> None:
    with plugged_in():
        assert "tinylog" in backend_names()
        config = config_from_dict(
            {"mq": {"type": "tinylog"}, "tinylog": {"store": "s1", "max_channels": 5}}, env={}
        )
        assert resolve_backend(config) == "tinylog"
        assert config.section(TinyLogConfig).max_channels == 5
        assert config.tinylog.store == "s1"
        assert config.to_dict()["tinylog"] == {
            "store": "s1",
            "max_channels": 5,
            "strict_names": False,
        }
        assert "| `tinylog.max_channels` | `MSGSTREAM_TINYLOG_MAX_CHANNELS` | int >= 1 |" in (
            config_reference_markdown()
        )
    assert "tinylog" not in backend_names()
    assert "tinylog" not in Config().to_dict()


def test_an_unregistered_mq_type_lists_the_backends_and_suggests_one() -> None:
    with plugged_in(), pytest.raises(ConfigError) as info:
        config_from_dict({"mq": {"type": "tinylgo"}}, env={})
    assert info.value.key == "mq.type"
    assert info.value.problem == (
        "invalid value 'tinylgo': must be one of 'default', 'rocksmq', 'kafka', 'pulsar', "
        "'memory', 'tinylog'; did you mean 'tinylog'?"
    )
    with pytest.raises(ConfigError) as info:
        config_from_dict({"mq": {"type": "tinylog"}}, env={})
    assert "'memory'" in info.value.problem
    assert "tinylog'" not in info.value.problem.split("must be one of")[1]


def test_the_section_of_an_unregistered_backend_is_an_unknown_section() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict({"tinylog": {"store": "x"}}, env={})
    assert info.value.key == "tinylog"
    assert info.value.problem.startswith("unknown key")
    with pytest.raises(ConfigError) as info:
        config_from_dict({}, env={"MSGSTREAM_TINYLOG_STORE": "x"})
    assert info.value.key == "MSGSTREAM_TINYLOG_STORE"
    with pytest.raises(ConfigError, match="is its backend registered"):
        Config().section(TinyLogConfig)


def test_a_third_party_section_validates_with_its_own_rules_and_environment() -> None:
    with plugged_in():
        with pytest.raises(ConfigError) as info:
            config_from_dict({"tinylog": {"max_channels": 0}}, env={})
        assert info.value.key == "tinylog.max_channels"
        assert info.value.problem == "out of range: got 0, expected int >= 1"
        with pytest.raises(ConfigError) as info:
            config_from_dict({"tinylog": {"max_channel": 3}}, env={})
        assert info.value.problem == "unknown key; did you mean 'tinylog.max_channels'?"
        with pytest.raises(ConfigError) as info:
            config_from_dict({"tinylog": {"store": "ABC", "strict_names": True}}, env={})
        assert info.value.key == "tinylog.store, tinylog.strict_names"

        env = {"MSGSTREAM_TINYLOG_STORE": "from-env", "MSGSTREAM_TINYLOG_STRICT_NAMES": "yes"}
        config = config_from_dict({"tinylog": {"store": "from-yaml"}}, env=env)
        assert (config.tinylog.store, config.tinylog.strict_names) == ("from-env", True)
        with pytest.raises(ConfigError) as info:
            config_from_dict({}, env={"MSGSTREAM_TINYLOG_MAX_CHANNELS": "-3"})
        assert info.value.problem == (
            "out of range: got -3, expected int >= 1 "
            "(from environment variable MSGSTREAM_TINYLOG_MAX_CHANNELS)"
        )
        with pytest.raises(ConfigError) as info:
            resolve_backend(config_from_dict({"mq": {"type": "tinylog"}}, env={}))
        assert (info.value.key, info.value.problem) == (
            "tinylog.store",
            "required when mq.type is tinylog",
        )


def test_a_backend_whose_extra_is_missing_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tinylog_needs_a_library.py").write_text(
        "import tinylog_broker_library  # not installed\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = dataclasses.replace(
        SPEC, client_factory="tinylog_needs_a_library:new_client", extra="tinylog"
    )
    with plugged_in(spec):
        config = config_from_dict({"mq": {"type": "tinylog"}, "tinylog": {"store": "x"}}, env={})
        with pytest.raises(BackendUnavailableError) as info:
            new_client(config)
    assert str(info.value) == (
        "backend 'tinylog' needs the module 'tinylog_broker_library', which is not "
        "installed; install it with: pip install 'msgstream[tinylog]'"
    )


def test_message_id_tags_name_their_backend() -> None:
    tagged = b"t" + (7).to_bytes(8, "big")
    assert tagged_id_owner(tagged) is None
    with plugged_in():
        assert tagged_id_owner(tagged) == "tinylog"
    assert tagged_id_owner(b"k" + bytes(8)) == "kafka"


def test_registration_refuses_a_clash() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_backend(backend_spec("memory"))
    with plugged_in():
        clash = dataclasses.replace(SPEC, name="tinylog2", section=_renamed("tinylog2"))
        with pytest.raises(ValueError, match="share the MessageID tag"):
            register_backend(clash)
    with pytest.raises(ValueError, match="SECTION must be the name"):
        BackendSpec(name="other", section=TinyLogConfig, client_factory="m:f")
    with pytest.raises(ValueError, match="no key of its section"):
        dataclasses.replace(SPEC, required_keys=("nope",))


def _renamed(name: str) -> type[TinyLogConfig]:
    return type(f"{name}Config", (TinyLogConfig,), {"SECTION": name, "__module__": __name__})
