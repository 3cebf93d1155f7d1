"""The factory: configuration picks the backend and the stream settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from msgstream import (
    BackendUnavailableError,
    MsgStreamFactory,
    TtMsgStream,
    config_from_dict,
    new_msgstream,
    new_ttmsgstream,
)


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
        await stream.as_consumer(["a"], "sub")
        assert stream.barrier.capacity == 11
    async with new_msgstream(config, receive_buffer_size=2) as plain:
        assert plain._receive_buffer_size == 2  # explicit options win


@pytest.mark.parametrize("backend", ["kafka", "pulsar"])
def test_a_backend_not_in_this_version_is_a_clear_error(backend: str) -> None:
    config = config_from_dict(
        {
            "mq": {"type": backend},
            "kafka": {"brokers": "k:9092"},
            "pulsar": {"address": "pulsar://p:6650"},
        },
        env={},
    )
    with pytest.raises(BackendUnavailableError, match=f"backend '{backend}' is not implemented"):
        new_msgstream(config)
