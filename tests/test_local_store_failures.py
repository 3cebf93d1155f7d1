"""The embedded stores (memory, rocksmq): a failed write is a typed error naming the channel.

Not in the conformance suite: it replaces the store's append, which only the local
backends have.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from msgstream import BackendUnavailableError, config_from_dict, new_client


@pytest.mark.parametrize("backend", ["memory", "rocksmq"])
async def test_a_failing_store_write_is_a_typed_error_naming_the_channel(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_from_dict(
        {
            "mq": {"type": backend},
            "memory": {"name": str(tmp_path)},
            "rocksmq": {"path": str(tmp_path / "r")},
        },
        env={},
    )
    client = new_client(config)
    channel = "full-disk"
    producer = await client.create_producer(channel)

    def disk_full(*_: object) -> list[int]:
        raise OSError("No space left on device")

    for write in ("append", "append_one"):  # a pack's write, and a lone message's
        monkeypatch.setattr(client.store, write, disk_full)  # type: ignore[attr-defined]
    for count, send in ((1, producer.send(b"x")), (2, producer.send_many([b"x", b"y"]))):
        with pytest.raises(BackendUnavailableError) as failed:
            await send
        assert str(failed.value) == (
            f"{backend}: writing {count} message(s) to channel '{channel}' failed: "
            "No space left on device"
        )
    await client.close()
