"""What a benchmark run sends: the workload's options and the messages it builds."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from ..wire.codec import encode
from ..wire.messages import InsertMsg, TsMsg
from ..wire.schema import DataType, FieldData
from ..wire.tso import TsoAllocator

COLLECTION = "msgstream_bench"
FIELD = "payload"


class WorkloadError(ValueError):
    """A workload that cannot run (a negative rate, no duration, ...): a usage error."""


@dataclass(frozen=True)
class Workload:
    """One benchmark workload (OpenMessaging Benchmark's terms: message size, rate,
    producers, channels)."""

    size: int = 1024
    """Encoded bytes per message (the envelope and body included), at least the size of an
    empty message; ignored with ``payload``."""
    payload: bytes | None = None
    """The bytes each message carries (``--payload-file``), instead of ``size``."""
    channels: int = 1
    producers: int = 1
    """Concurrent producing tasks; producer ``k`` sends to channels ``k, k+P, k+2P, ...`` in
    turn (with more producers than channels, several share channel ``k mod C``)."""
    pack_size: int = 1
    """Messages per ``produce`` call."""
    rate: float | None = None
    """Messages per second, all producers together (open loop); None: as fast as
    acknowledgements come back (closed loop)."""
    warmup_s: float = 1.0
    duration_s: float | None = 10.0
    messages: int | None = None
    """Stop after this many measured messages instead of ``duration_s``."""
    interval_s: float = 1.0
    """Length of the intervals of the progress display, the interval log and the charts."""
    prebuilt: int = 0
    """Packs built per channel before the run and sent over and over (their msg_ids and
    timestamps repeat), so that what is measured is the client, not the building of
    messages; 0: each pack is built right before it is sent (inside the measured time)."""

    def __post_init__(self) -> None:
        for name in ("size", "channels", "producers", "pack_size"):
            if getattr(self, name) < 1:
                raise WorkloadError(f"--{name.replace('_', '-')} must be >= 1")
        if self.rate is not None and not (self.rate > 0 and math.isfinite(self.rate)):
            raise WorkloadError(f"--rate must be a positive number or 'max', got {self.rate:g}")
        if self.warmup_s < 0:
            raise WorkloadError("--warmup must be >= 0 seconds")
        if self.messages is None and self.duration_s is None:
            raise WorkloadError("give --duration or --messages")
        if self.messages is not None and self.messages < 1:
            raise WorkloadError("--messages must be >= 1")
        if self.duration_s is not None and not self.duration_s > 0:
            raise WorkloadError("--duration must be > 0 seconds")
        if not self.interval_s > 0:
            raise WorkloadError("the reporting interval must be > 0 seconds")
        if self.prebuilt < 0:
            raise WorkloadError("--prebuilt must be >= 0")

    def channels_of(self, producer: int) -> list[int]:
        """The indexes of the channels producer ``producer`` sends to, in turn."""
        if self.producers > self.channels:
            return [producer % self.channels]
        return list(range(producer, self.channels, self.producers))

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["payload"] = None if self.payload is None else len(self.payload)
        data["rate"] = "max" if self.rate is None else self.rate
        data["mode"] = "open-loop" if self.open_loop else "closed-loop"
        return data


def parse_rate(value: str) -> float | None:
    """``--rate``: messages per second, or ``max`` (closed loop)."""
    if value.strip().lower() == "max":
        return None
    try:
        rate = float(value)
    except ValueError:
        raise WorkloadError(f"--rate must be a number or 'max', got {value!r}") from None
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadError(f"--rate must be a positive number or 'max', got {value!r}")
    return rate


def read_payload_file(path: str) -> bytes:
    try:
        with open(os.path.expanduser(path), "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise WorkloadError(f"--payload-file: cannot read {path}: {exc.strerror or exc}") from None


class MessageFactory:
    """Builds the workload's messages: one-row InsertMsgs whose binary column carries the
    payload, sized so the encoded message has ``workload.size`` bytes. Each message gets a
    fresh hybrid timestamp and msg_id, and the hash key of its channel."""

    def __init__(self, workload: Workload, source_id: int = 0) -> None:
        self.tso = TsoAllocator()
        self.source_id = source_id
        probe = self.tso.allocate()  # a real timestamp: sized as the messages sent will be
        if workload.payload is not None:
            self.payload = workload.payload
        else:
            overhead = len(encode(self._message(b"", 0, probe)))
            if workload.size < overhead:
                raise WorkloadError(
                    f"--size {workload.size} is below the smallest message ({overhead} bytes)"
                )
            length = workload.size - overhead
            for _ in range(4):  # lengths in the body may take a digit more: settle on the size
                self.payload = b"\x5a" * max(0, length)
                excess = len(encode(self._message(self.payload, 0, probe))) - workload.size
                if excess <= 0:
                    break
                length -= excess
        self.message_bytes = len(encode(self._message(self.payload, 0, probe)))

    def _message(self, payload: bytes, channel: int, ts: int) -> InsertMsg:
        return InsertMsg(
            msg_id=ts,
            timestamp=ts,
            source_id=self.source_id,
            hash_keys=[channel],
            collection_name=COLLECTION,
            row_ids=[ts],
            fields=[FieldData(FIELD, DataType.BINARY, [payload])],
        )

    def message(self, channel: int, ts: int) -> InsertMsg:
        """One message for channel ``channel`` stamped ``ts`` (also its msg_id)."""
        return self._message(self.payload, channel, ts)

    def pack(self, channel: int, count: int) -> list[TsMsg]:
        """``count`` messages for channel ``channel`` (its index among the run's channels)."""
        first = self.tso.allocate(count)
        return [self._message(self.payload, channel, first + i) for i in range(count)]
