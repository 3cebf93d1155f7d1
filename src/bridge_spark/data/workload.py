"""A sample collection produced over several channels: for the demo, tests and benchmarks.

The collection has an int64 primary key ``pk``, a float vector ``vec``, a string
``text`` and a nullable JSON field ``meta``; every value is a function of the key (so a
reader can check content, not just counts): ``vec[i] = pk + i / 8``, ``text =
"row-<pk>"``, ``meta = {"pk": pk, "even": pk % 2 == 0}`` or null when ``pk % 7 == 0``.
Inserts carry several keys each and are routed by key (one InsertMsg becomes one message
per channel it touches); deletes remove keys inserted earlier, each key at most once.
A :class:`~msgstream.TimeTickEmitter` stamps everything and ticks every channel after
every ``msgs_per_tick`` produce calls (and once at the end).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from msgstream.streams.emitter import TimeTickEmitter
from msgstream.streams.routing import hash_primary_keys
from msgstream.streams.stream import MsgStream
from msgstream.wire.messages import CreateCollectionMsg, DeleteMsg, DmlHeader, InsertMsg, TsMsg
from msgstream.wire.pack import MsgPack
from msgstream.wire.schema import CollectionSchema, DataType, FieldData, FieldSchema

SAMPLE_COLLECTION = "demo"
SAMPLE_DIM = 8


def sample_schema(name: str = SAMPLE_COLLECTION, dim: int = SAMPLE_DIM) -> CollectionSchema:
    return CollectionSchema(
        name,
        (
            FieldSchema("pk", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=dim),
            FieldSchema("text", DataType.VARCHAR),
            FieldSchema("meta", DataType.JSON, nullable=True),
        ),
    )


def sample_vectors(pks: npt.NDArray[np.int64], dim: int) -> npt.NDArray[np.float32]:
    """``vec[i] = pk + i / 8`` (exact in float32 for keys below 2**20)."""
    return (pks[:, None] + np.arange(dim)[None, :] / 8).astype(np.float32)


def sample_meta(pk: int) -> dict[str, object] | None:
    return None if pk % 7 == 0 else {"pk": pk, "even": pk % 2 == 0}


@dataclass
class Produced:
    """What a :class:`SampleProducer` sent."""

    inserted: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    insert_msgs: int = 0
    delete_msgs: int = 0
    ticks: int = 0
    last_tick: int = 0


class SampleProducer:
    """Produces the sample collection through ``stream`` (already ``as_producer``)."""

    def __init__(
        self,
        stream: MsgStream,
        *,
        schema: CollectionSchema | None = None,
        rows_per_insert: tuple[int, int] = (4, 12),
        delete_every: int = 4,
        msgs_per_tick: int = 8,
        seed: int | None = 0,
        emitter: TimeTickEmitter | None = None,
    ) -> None:
        self.stream = stream
        self.schema = schema or sample_schema()
        self.dim = self.schema.field("vec").dim or SAMPLE_DIM
        self.rows_per_insert = rows_per_insert
        self.delete_every = delete_every
        self.msgs_per_tick = msgs_per_tick
        self.rng = np.random.default_rng(seed)
        self.emitter = emitter or TimeTickEmitter(stream, interval_s=3600)
        self.produced = Produced()
        self._alive: list[int] = []
        self._pks = itertools.count(1)
        self._msg_ids = itertools.count(1)
        self._calls = 0

    async def create_collection(self) -> None:
        async with self.emitter.reserve() as ts:
            msg = CreateCollectionMsg(
                msg_id=next(self._msg_ids),
                timestamp=ts,
                collection_name=self.schema.name,
                schema=self.schema,
            )
            await self.stream.broadcast(MsgPack.of(msg))
        await self._tick()

    async def _tick(self) -> None:
        tick = await self.emitter.tick()
        if tick is not None:
            self.produced.ticks += 1
            self.produced.last_tick = tick

    async def insert(self, rows: int) -> None:
        pks = np.fromiter(itertools.islice(self._pks, rows), np.int64, rows)
        await self._produce_dml(
            pks, lambda header: InsertMsg(row_ids=pks, fields=self._sample_fields(pks), **header)
        )
        self.produced.inserted.extend(pks.tolist())
        self.produced.insert_msgs += 1
        self._alive.extend(pks.tolist())
        await self._after_call()

    def _sample_fields(self, pks: npt.NDArray[np.int64]) -> list[FieldData]:
        return [
            FieldData("pk", DataType.INT64, pks),
            FieldData("vec", DataType.FLOAT_VECTOR, sample_vectors(pks, self.dim), self.dim),
            FieldData("text", DataType.VARCHAR, [f"row-{pk}" for pk in pks.tolist()]),
            FieldData("meta", DataType.JSON, [sample_meta(pk) for pk in pks.tolist()]),
        ]

    async def delete(self, count: int) -> None:
        count = min(count, len(self._alive))
        if count == 0:
            return
        keys = np.array([self._take_alive() for _ in range(count)], np.int64)
        await self._produce_dml(keys, lambda header: DeleteMsg(primary_keys=keys, **header))
        self.produced.deleted.extend(keys.tolist())
        self.produced.delete_msgs += 1
        await self._after_call()

    async def _produce_dml(
        self, keys: npt.NDArray[np.int64], make: Callable[[DmlHeader], TsMsg]
    ) -> None:
        """Produce the Insert or Delete of ``keys`` that ``make`` builds around the header
        both take: the next msg_id, the emitter's timestamp, the collection, the keys' hashes."""
        async with self.emitter.reserve() as ts:
            header: DmlHeader = {
                "msg_id": next(self._msg_ids),
                "timestamp": ts,
                "collection_name": self.schema.name,
                "hash_keys": hash_primary_keys(keys),
            }
            await self.stream.produce(MsgPack.of(make(header)))

    def _take_alive(self) -> int:
        index = int(self.rng.integers(0, len(self._alive)))
        alive = self._alive
        alive[index], alive[-1] = alive[-1], alive[index]
        return alive.pop()

    async def _after_call(self) -> None:
        self._calls += 1
        if self._calls % self.msgs_per_tick == 0:
            await self._tick()

    async def produce_rows(self, rows: int) -> Produced:
        """Insert about ``rows`` rows (and delete some), then tick once more."""
        low, high = self.rows_per_insert
        target = len(self.produced.inserted) + rows
        while len(self.produced.inserted) < target:
            count = min(int(self.rng.integers(low, high + 1)), target - len(self.produced.inserted))
            await self.insert(count)
            if self.delete_every and self.produced.insert_msgs % self.delete_every == 0:
                await self.delete(int(self.rng.integers(1, 4)))
        await self._tick()
        return self.produced

    async def finish(self) -> None:
        """A final tick covering everything sent."""
        await self._tick()
