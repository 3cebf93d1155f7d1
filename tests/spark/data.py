"""Test data for the Spark bridge: configurations, the sample collection, raw scripts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from msgstream import (
    Config,
    DeleteMsg,
    MsgPack,
    TimeTickMsg,
    TsMsg,
    config_from_dict,
    new_msgstream,
)
from msgstream.bridge_spark.data.workload import Produced, SampleProducer


def rocksmq_config(path: Path) -> Config:
    return config_from_dict({"mq": {"type": "rocksmq"}, "rocksmq": {"path": str(path)}}, env={})


def memory_config(name: str) -> Config:
    return config_from_dict({"mq": {"type": "memory"}, "memory": {"name": name}}, env={})


def channel_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


async def produce_sample(
    config: Config,
    channels: Sequence[str],
    rows: int,
    *,
    seed: int = 0,
    create: bool = True,
    msgs_per_tick: int = 8,
) -> Produced:
    """The sample collection (``msgstream.bridge_spark.data.workload``): about ``rows`` inserted
    rows and some deletes, ticked every ``msgs_per_tick`` produce calls and at the end."""
    async with new_msgstream(config) as stream:
        await stream.as_producer(list(channels))
        producer = SampleProducer(stream, seed=seed, msgs_per_tick=msgs_per_tick)
        if create:
            await producer.create_collection()
        return await producer.produce_rows(rows)


@dataclass(frozen=True)
class Step:
    """One raw message of a script: a tick, or a one-key Delete of key ``key``."""

    channel: int
    ts: int
    tick: bool = False
    key: int = 0


def step_message(step: Step, msg_id: int, collection: str = "demo") -> TsMsg:
    if step.tick:
        return TimeTickMsg(msg_id=msg_id, timestamp=step.ts, hash_keys=[step.channel])
    return DeleteMsg(
        msg_id=msg_id,
        timestamp=step.ts,
        collection_name=collection,
        primary_keys=np.array([step.key], np.int64),
        hash_keys=[step.channel],
    )


async def produce_script(config: Config, channels: Sequence[str], steps: Sequence[Step]) -> None:
    """Send each step to its channel, in order (each message is one produce call)."""
    async with new_msgstream(config) as stream:
        await stream.as_producer(list(channels))
        for msg_id, step in enumerate(steps, start=1):
            await stream.produce(MsgPack(msgs=[step_message(step, msg_id)]))
