"""A shared rocksmq store whose owner is SIGKILLed again and again, under load.

Three producer processes (each with its own ``TimeTickEmitter`` on its own channels) and
two ``TtMsgStream`` consumer processes share one store over 8 channels, all attached to
whichever process owns it. The test SIGKILLs the owner at random moments, at least
:data:`KILLS` times: first a process that does nothing but own it, then whichever
producer or consumer took it over; a killed worker is restarted (a producer under a new
message-id range, a consumer resuming after the last pack it wrote). Afterwards every
acknowledged message must be in each consumer's output exactly once, in time-tick
order, and the packs must follow each other without a gap or a repeat across the
restarts (see ``helpers/shared_child.py`` for what the processes write).
"""

from __future__ import annotations

import asyncio
import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from helpers.rocksmq_child import SCRIPT as OWNER_SCRIPT
from msgstream import MsgPack, MsgStream, TimeTickMsg, repack_by_first_key
from msgstream.backends.rocksmq import open_client
from msgstream.backends.rocksmq.ownership import read_owner

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).resolve().parent / "helpers" / "shared_child.py")
CHANNELS = [f"shared-{i}" for i in range(8)]
PRODUCERS = 3
CONSUMERS = 2
KILLS = 10
DEADLINE_S = 60.0
"""The longest the test waits for any one thing (generous: the machine may be loaded)."""
PROGRESS_ACKS = 15
"""Acknowledged sends each producer must add between two kills (owner taken over)."""


@dataclass
class Worker:
    """One process of the test, restartable; its lines go to the crowd's queue."""

    name: str
    args: list[str]
    lines: queue.Queue[tuple[str, int, str | None]]
    script: str = SCRIPT
    proc: subprocess.Popen[str] | None = None
    stderr: list[str] = field(default_factory=list)
    incarnation: int = 0

    def start(self, args: list[str] | None = None) -> None:
        self.incarnation += 1
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (read when it fails)
        self.proc = subprocess.Popen(
            [sys.executable, self.script, *(args or self.args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            bufsize=1,
        )
        pump = threading.Thread(target=self._pump, args=(self.proc, self.incarnation))
        pump.daemon = True
        pump.start()

    def _pump(self, proc: subprocess.Popen[str], incarnation: int) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.endswith("\n"):  # a killed process may leave half a line
                self.lines.put((self.name, incarnation, line[:-1]))
        self.lines.put((self.name, incarnation, None))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(DEADLINE_S)
        self._keep_stderr()

    def tell(self, text: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def _keep_stderr(self) -> None:
        self._err.seek(0)
        self.stderr.append(self._err.read())
        self._err.close()

    def close(self) -> None:
        if self.proc is not None and self.alive():
            self.proc.kill()
            self.proc.wait(DEADLINE_S)
            self._keep_stderr()


class Crowd:
    """The workers and what they have said so far."""

    def __init__(self) -> None:
        self.lines: queue.Queue[tuple[str, int, str | None]] = queue.Queue()
        self.workers: dict[str, Worker] = {}
        self.up: set[str] = set()
        """Workers whose current process has said something (it runs: not importing)."""
        self.acked: dict[int, str] = {}
        """msg_id -> channel of every acknowledged send."""
        self.failed: Counter[str] = Counter()
        self.acks: Counter[str] = Counter()
        self.packs: Counter[str] = Counter()
        self.end_ts: dict[str, int] = {}
        self.done: dict[str, int] = {}

    def add(self, name: str, args: list[str], script: str = SCRIPT) -> Worker:
        worker = self.workers[name] = Worker(name, args, self.lines, script)
        worker.start()
        return worker

    def restart(self, worker: Worker, args: list[str] | None = None) -> None:
        self.up.discard(worker.name)
        worker.start(args)

    def pump(self, until: float) -> bool:
        """Take one line (False when none came before ``until``)."""
        try:
            name, incarnation, line = self.lines.get(timeout=max(until - time.monotonic(), 0))
        except queue.Empty:
            return False
        if line is None:
            return True
        if incarnation == self.workers[name].incarnation:
            self.up.add(name)
        kind, *rest = line.split()
        if kind == "ACK":
            self.acked[int(rest[1])] = rest[0]
            self.acks[name] += 1
        elif kind == "FAIL":
            self.failed[rest[1]] += 1
        elif kind == "PACK":
            self.packs[name] += 1
            self.end_ts[name] = int(rest[0])
        elif kind == "DONE":
            self.done[name] = int(rest[0])
        return True

    def wait(self, what: str, condition: object) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():  # type: ignore[operator]
            if not self.pump(deadline) and time.monotonic() >= deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.describe()}")

    def describe(self) -> str:
        parts = [f"acks {dict(self.acks)} packs {dict(self.packs)} failed {dict(self.failed)}"]
        for worker in self.workers.values():
            if worker.proc is not None and not worker.alive() and not worker._err.closed:
                worker._keep_stderr()
            errors = "".join(worker.stderr)[-2000:]
            if errors:
                parts.append(f"--- {worker.name} stderr:\n{errors}")
        return "\n".join(parts)

    def owner(self, path: Path) -> Worker | None:
        """The live worker the store's lock file names (only a holder of the lock writes
        its pid there, and nobody here lets go of it but by dying)."""
        info = read_owner(str(path))
        for worker in self.workers.values():
            if info is not None and worker.alive() and worker.pid == info.pid:
                return worker
        return None


def producer_channels(index: int) -> list[str]:
    return [c for i, c in enumerate(CHANNELS) if i % PRODUCERS == index]


async def final_tick(path: Path, tick: int) -> None:
    """Every channel ticks past all data, so both consumers can cut their last pack."""
    stream = MsgStream(open_client(str(path)), repack=repack_by_first_key)
    async with stream:
        await stream.as_producer(CHANNELS)
        await stream.broadcast(MsgPack.of(TimeTickMsg(timestamp=tick)))


def check_output(output: Path, acked: dict[int, str]) -> int:
    """Packs back to back, in time order, each acknowledged message exactly once; returns
    the number of packs."""
    lines = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    seen: Counter[int] = Counter()
    previous_end = None
    for number, pack in enumerate(lines):
        begin, end = pack["begin_ts"], pack["end_ts"]
        assert end > begin, f"pack {number}: end_ts {end} <= begin_ts {begin}"
        if previous_end is not None:
            assert begin == previous_end, f"pack {number} starts at {begin}, not {previous_end}"
        previous_end = end
        stamps = [ts for _, _, ts in pack["msgs"]]
        assert stamps == sorted(stamps), f"pack {number} is not in time order"
        assert all(begin < ts <= end for ts in stamps), f"pack {number}: a message out of range"
        for channel, msg_id, _ in pack["msgs"]:
            if msg_id in acked:
                assert acked[msg_id] == channel
            seen[msg_id] += 1
    repeated = {m: n for m, n in seen.items() if n > 1}
    assert not repeated, f"{output.name}: delivered more than once: {repeated}"
    missing = sorted(set(acked) - set(seen))
    assert not missing, f"{output.name}: {len(missing)} acknowledged messages lost: {missing[:20]}"
    return len(lines)


def test_owner_sigkilled_ten_times_loses_and_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store"
    seed = int(os.environ.get("SHARED_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"seed {seed} (SHARED_CHAOS_SEED repeats it)")
    crowd = Crowd()
    try:
        first = crowd.add("owner", ["own", str(path)], script=OWNER_SCRIPT)
        crowd.wait("the first owner", lambda: crowd.owner(path) is first)
        producers = [
            crowd.add(f"p{i}", ["produce-tt", str(path), str(i * 100 + 1), "0.02",
                                *producer_channels(i)])
            for i in range(PRODUCERS)
        ]  # fmt: skip
        crowd.wait("the channels made", lambda: all(crowd.acks[p.name] for p in producers))
        outputs = [tmp_path / f"c{i}.jsonl" for i in range(CONSUMERS)]
        for i, output in enumerate(outputs):
            crowd.add(f"c{i}", ["consume-tt", str(path), str(output), f"sub{i}", *CHANNELS])
        handovers: list[float] = []
        killed: list[str] = []
        for kill in range(KILLS):
            # Every process that runs (a restarted one may still be starting) makes
            # progress, then the owner goes at a random moment in the next sends.
            acks = {p.name: crowd.acks[p.name] for p in producers if p.name in crowd.up}
            packs = {f"c{i}": crowd.packs[f"c{i}"] for i in range(CONSUMERS)}
            packs = {n: c for n, c in packs.items() if n in crowd.up}
            extra = rng.randrange(40)
            crowd.wait(
                f"progress before kill {kill + 1}",
                lambda acks=acks, packs=packs, extra=extra: (
                    all(crowd.acks[n] >= a + PROGRESS_ACKS + extra for n, a in acks.items())
                    and all(crowd.packs[n] > c for n, c in packs.items())
                    # two producers run: one still does once the owner is killed
                    and sum(p.name in crowd.up for p in producers) >= 2
                ),
            )
            owner = crowd.owner(path)
            assert owner is not None, f"no live process owns the store:\n{crowd.describe()}"
            while crowd.pump(time.monotonic()):  # what was said before the kill
                pass
            running = [p for p in producers if p is not owner and p.name in crowd.up]
            assert running, f"no producer runs but {owner.name}: {crowd.describe()}"
            survivors = {p.name: crowd.acks[p.name] for p in running}
            owner.kill()
            killed_at = time.monotonic()
            killed.append(owner.name)
            if owner.name.startswith("p"):
                index = int(owner.name[1:])
                crowd.restart(
                    owner,
                    ["produce-tt", str(path), str(index * 100 + owner.incarnation + 1), "0.02",
                     *producer_channels(index)],
                )  # fmt: skip
            elif owner.name.startswith("c"):
                crowd.restart(owner)
            crowd.wait(
                "the other producers' sends acknowledged after the kill",
                lambda survivors=survivors: all(
                    crowd.acks[n] >= a + 3 for n, a in survivors.items()
                ),
            )
            handovers.append(time.monotonic() - killed_at)
        print(f"owners killed: {', '.join(killed)}")
        print(f"{KILLS} kills; the other producers carried on after: "
              f"{', '.join(f'{h * 1000:.0f} ms' for h in handovers)}")  # fmt: skip
        assert max(handovers) < 10.0

        for producer in producers:
            producer.tell("stop")
        crowd.wait("every producer's last tick", lambda: len(crowd.done) == PRODUCERS)
        last = max(crowd.done.values())
        asyncio.run(final_tick(path, last + 1))
        crowd.wait(
            "both consumers past the last tick",
            lambda: all(crowd.end_ts.get(f"c{i}", 0) > last for i in range(CONSUMERS)),
        )
        assert len(crowd.acked) > KILLS * PROGRESS_ACKS * PRODUCERS
        for output in outputs:
            check_output(output, crowd.acked)
        print(f"{len(crowd.acked)} messages acknowledged, failed sends: {dict(crowd.failed)}")
    finally:
        for worker in crowd.workers.values():
            worker.close()
