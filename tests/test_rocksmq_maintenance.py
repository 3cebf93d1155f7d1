"""Retention runs by itself in the background of a client's event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from msgstream import SubscriptionPosition, config_from_dict, new_client


async def test_background_retention_deletes_acknowledged_expired_pages(tmp_path: Path) -> None:
    config = config_from_dict(
        {
            "mq": {"type": "rocksmq"},
            "rocksmq": {
                "path": str(tmp_path / "store"),
                "retention_max_age_s": 0,
                "retention_check_interval_s": 0.05,
            },
        },
        env={},
    )
    client = new_client(config)  # retention starts with the first producer or subscription
    try:
        producer = await client.create_producer("ch")
        await producer.send_many([b"a", b"b", b"c"])
        consumer = await client.subscribe("ch", "sub", SubscriptionPosition.EARLIEST)
        for _ in range(3):
            last = await asyncio.wait_for(consumer.receive(), 5)
        await consumer.ack(last)
        store = client.store  # type: ignore[attr-defined]
        for _ in range(100):
            if store.first_id("ch") is None:
                break
            await asyncio.sleep(0.05)
        assert store.first_id("ch") is None
        assert store.next_id("ch") == 4
        await producer.send(b"d")
        assert [m.payload for m in [await asyncio.wait_for(consumer.receive(), 5)]] == [b"d"]
    finally:
        await client.close()


async def test_unacknowledged_messages_are_kept(tmp_path: Path) -> None:
    config = config_from_dict(
        {
            "rocksmq": {
                "path": str(tmp_path / "store"),
                "retention_max_age_s": 0,
                "retention_check_interval_s": 0.05,
            }
        },
        env={},
    )
    client = new_client(config)
    try:
        producer = await client.create_producer("ch")
        await client.subscribe("ch", "slow", SubscriptionPosition.EARLIEST)
        await producer.send_many([b"a", b"b"])
        await asyncio.sleep(0.3)
        assert client.store.first_id("ch") == 1  # type: ignore[attr-defined]
    finally:
        await client.close()
