"""The factory: configuration picks the backend and the stream settings."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path

import pytest

from msgstream import (
    BackendUnavailableError,
    MsgStream,
    MsgStreamFactory,
    TtMsgStream,
    config_from_dict,
    new_msgstream,
    new_ttmsgstream,
)
from msgstream.configuration import plugins
from msgstream.configuration.config import MsgStreamConfig
from msgstream.streams.factory import stream_options, ttstream_options


async def test_default_picks_rocksmq_when_its_path_is_set(tmp_path: Path) -> None:
    config = config_from_dict(
        {"rocksmq": {"path": str(tmp_path)}, "kafka": {"brokers": "k:9092"}}, env={}
    )
    factory = MsgStreamFactory(config)
    assert factory.backend == "rocksmq"
    async with factory.new_msgstream() as stream:
        assert stream.client.backend_name == "rocksmq"


async def test_stream_settings_come_from_the_config() -> None:
    config = config_from_dict(
        {
            "mq": {"type": "memory"},
            "msgstream": {
                "receive_buffer_size": 7,
                "late_policy": "reject",
                "pursuit_lag_s": 3,
                "tt_channel_buffer_size": 11,
            },
        },
        env={},
    )
    async with new_ttmsgstream(config) as stream:
        assert isinstance(stream, TtMsgStream)
        assert stream._receive_buffer_size == 7
        assert (stream._late_policy, stream.pursuit_lag_s) == ("reject", 3.0)
        await stream.as_consumer(["a"], "sub", missing="create")
        assert stream.barrier.capacity == 11
    async with new_msgstream(config, receive_buffer_size=2) as plain:
        assert plain._receive_buffer_size == 2  # explicit options win


BROKER_CONFIG = {"kafka": {"brokers": "k:9092"}, "pulsar": {"address": "pulsar://p:6650"}}


@pytest.mark.parametrize(("backend", "library"), [("kafka", "aiokafka"), ("pulsar", "pulsar")])
def test_a_backend_whose_library_is_missing_names_the_extra(
    backend: str, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_from_dict({"mq": {"type": backend}, **BROKER_CONFIG}, env={})
    for name in list(sys.modules):
        if name == library or name.startswith((f"{library}.", f"msgstream.backends.{backend}")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, library, None)  # makes `import <library>` fail
    with pytest.raises(BackendUnavailableError) as info:
        new_msgstream(config)
    assert f"pip install 'msgstream[{backend}]'" in str(info.value)
    assert repr(library) in str(info.value)


def test_a_backend_module_that_does_not_exist_is_a_clear_error() -> None:
    kafka = plugins.backend_spec("kafka")
    plugins.unregister_backend("kafka")
    plugins.register_backend(
        dataclasses.replace(kafka, client_factory="msgstream.backends.no_such_module:new")
    )
    try:
        config = config_from_dict({"mq": {"type": "kafka"}, **BROKER_CONFIG}, env={})
        with pytest.raises(BackendUnavailableError, match="backend 'kafka' is not implemented"):
            new_msgstream(config)
    finally:
        plugins.unregister_backend("kafka")
        plugins.register_backend(kafka)


CONFIGURED_OPTIONS = {
    "receive_buffer_size": "receive_buffer_size",
    "receive_buffer_bytes": "receive_buffer_bytes",
    "max_message_bytes": "max_message_bytes",
    "late_policy": "late_policy",
    "tt_channel_buffer_size": "channel_buffer_size",
    "tt_channel_buffer_bytes": "channel_buffer_bytes",
    "pursuit_lag_s": "pursuit_lag_s",
    "pursuit_buffer_size_bytes": "pursuit_buffer_size_bytes",
    "pursuit_buffer_time_s": "pursuit_buffer_time_s",
    "tick_interval_s": "tick_interval_s",
    "stall_after_ticks": "stall_after_ticks",
}
"""Each ``msgstream`` key that sets a stream option, and the option (written out here so
that the derived mapping is checked against something)."""


def test_every_configured_option_reaches_the_streams() -> None:
    """Each key sets its option, with the key's own value (all different from the
    defaults), in the factory's streams; a MsgStream gets only the options it has."""
    section = MsgStreamConfig(
        receive_buffer_size=3,
        receive_buffer_bytes=5,
        max_message_bytes=7,
        late_policy="reject",
        tt_channel_buffer_size=11,
        tt_channel_buffer_bytes=13,
        pursuit_lag_s=17.0,
        pursuit_buffer_size_bytes=19,
        pursuit_buffer_time_s=23.0,
        tick_interval_s=29.0,
        stall_after_ticks=31.0,
    )
    expected = {option: getattr(section, key) for key, option in CONFIGURED_OPTIONS.items()}
    assert ttstream_options(section) == expected
    assert stream_options(section) == {
        "receive_buffer_size": 3,
        "receive_buffer_bytes": 5,
        "max_message_bytes": 7,
    }
    unused = set(MsgStreamConfig.model_fields) - set(CONFIGURED_OPTIONS)
    assert unused == {"operation_timeout_s"}  # the clients', not the streams'


@pytest.mark.parametrize("stream_cls", [MsgStream, TtMsgStream])
def test_the_constructors_defaults_are_the_configurations(stream_cls: type[MsgStream]) -> None:
    """A stream made without options is one made from the default configuration: the
    signatures' defaults are the ``msgstream`` section's (a TtMsgStream passes
    MsgStream's options on as ``**kwargs``)."""
    defaults = MsgStreamConfig()
    parameters = {
        **inspect.signature(MsgStream).parameters,
        **inspect.signature(stream_cls).parameters,
    }
    configured = ttstream_options if stream_cls is TtMsgStream else stream_options
    for option, value in configured(defaults).items():
        assert parameters[option].default == value, option
