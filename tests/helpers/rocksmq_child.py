"""A separate process working on a rocksmq store, driven by the rocksmq tests.

Usage: ``python rocksmq_child.py MODE PATH [ARGS...]``; every line it prints is flushed
at once, so the parent sees it as soon as the step it reports has completed.

``produce PATH SYNC CHANNEL...``
    Produce to the channels forever (until killed). Per channel, message ``seq`` has
    payload ``b"<channel>:<seq>"``; seqs ``s % 8 < 5`` are sent one by one with the
    properties ``{"seq": str(seq)}``, seqs ``5..7`` of each block of 8 as one
    ``send_many`` batch without properties. Prints ``ACK <channel> <id> <seq>`` for every
    message once its ``send``/``send_many`` has returned.

``ack PATH CHANNEL COUNT ACK_AT [SHARING]``
    Produce ``COUNT`` messages, subscribe ``sub`` at EARLIEST, receive up to the message
    with id ``ACK_AT``, ack it, print ``ACKED <id>``, then wait to be killed. The store is
    opened with ``rocksmq.sharing`` ``SHARING`` (``auto`` by default).

``own PATH``
    Open the store (creating it) so this process owns it and serves other processes,
    print ``OWNING <pid>``, and keep it until stdin has a line or ends; then close it and
    print ``CLOSED``.

``own-fork PATH``
    As ``own``, then fork a child that sleeps (it inherits the store's lock and sockets)
    and print ``FORKED <child pid>``.

``read PATH CHANNEL EXPECTED LATE_CHANNEL LATE_EXPECTED``
    Open the store read-only, subscribe ``reader`` at EARLIEST, print ``OPENED``, then
    ``MSG <id> <payload>`` for ``EXPECTED`` messages (waiting for the writer as needed),
    then read ``LATE_EXPECTED`` messages of ``LATE_CHANNEL`` (a channel the writer creates
    after this process opened) as ``LATE <id> <payload>``. Then try to produce and print
    ``PRODUCE <error class>``, print ``READY_TO_ACK``, wait for a line on stdin, ack the
    last message, print ``ACKED <next id of the volatile cursor>`` and exit.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

from msgstream.backends.log_client.client import LogClient, LogMessageID
from msgstream.backends.rocksmq import RocksOptions, open_client
from msgstream.backends.rocksmq.store import RocksStore
from msgstream.wire.position import SubscriptionPosition

TIMEOUT_S = 120.0
"""How long the child may take to print its next line or to exit: starting an interpreter
and importing msgstream alone can take tens of seconds on a loaded machine."""
SCRIPT = os.path.abspath(__file__)


class Child:
    """This script (or ``script``) run as a separate process, with its stdout read line
    by line."""

    def __init__(self, *args: str, script: str = SCRIPT) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith("\n"):  # a killed child may leave half a line: not printed
                self._lines.put(line[:-1])
        self._lines.put(None)

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def line(self, timeout: float = TIMEOUT_S) -> str:
        """The next line printed; fails the test on timeout or end of output."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"child printed nothing for {timeout} s:\n{self.stderr()}"
            ) from None
        if line is None:
            self.proc.wait()
            raise AssertionError(f"child exited ({self.proc.returncode}) early:\n{self.stderr()}")
        return line

    def send_line(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> list[str]:
        """SIGKILL the child; return the lines it printed that were not read yet."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(TIMEOUT_S)
        self._reader.join(TIMEOUT_S)
        rest: list[str] = []
        while (line := self._lines.get_nowait()) is not None:
            rest.append(line)
        return rest

    def wait(self) -> int:
        """Wait for a normal exit; return the exit code."""
        code = self.proc.wait(TIMEOUT_S)
        self._reader.join(TIMEOUT_S)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()


def out(*parts: object) -> None:
    sys.stdout.write(" ".join(map(str, parts)) + "\n")
    sys.stdout.flush()


def value(msg_id: object) -> int:
    assert isinstance(msg_id, LogMessageID)
    return msg_id.value


async def produce(path: str, sync: bool, channels: list[str]) -> None:
    client = open_client(path, RocksOptions(sync=sync))
    producers = [await client.create_producer(ch) for ch in channels]
    seq = 0
    while True:
        for producer in producers:
            ch = producer.channel
            for s in range(seq, seq + 5):
                msg_id = await producer.send(f"{ch}:{s}".encode(), {"seq": str(s)})
                out("ACK", ch, value(msg_id), s)
            batch = range(seq + 5, seq + 8)
            ids = await producer.send_many([f"{ch}:{s}".encode() for s in batch])
            for s, msg_id in zip(batch, ids, strict=True):
                out("ACK", ch, value(msg_id), s)
        seq += 8


async def ack(path: str, channel: str, count: int, ack_at: int, sharing: str = "auto") -> None:
    assert sharing in ("auto", "exclusive")
    client = open_client(path, sharing="auto" if sharing == "auto" else "exclusive")
    producer = await client.create_producer(channel)
    await producer.send_many([f"m{i}".encode() for i in range(1, count + 1)])
    consumer = await client.subscribe(channel, "sub", SubscriptionPosition.EARLIEST)
    while True:
        msg = await asyncio.wait_for(consumer.receive(), TIMEOUT_S)
        if value(msg.msg_id) == ack_at:
            await consumer.ack(msg)
            out("ACKED", ack_at)
            break
    await asyncio.sleep(3600)


async def own(path: str, fork: bool = False) -> None:
    client = open_client(path)
    assert isinstance(client, LogClient), "another process owns the store"
    out("OWNING", os.getpid())
    if fork:
        child = os.fork()
        if child == 0:  # holds whatever the fork left it until killed, but not our pipes
            quiet = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(quiet, fd)
            signal.pause()
            os._exit(0)
        out("FORKED", child)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await client.close()
    out("CLOSED")


async def read(path: str, channel: str, expected: int, late: str, late_expected: int) -> None:
    client = open_client(path, RocksOptions(read_only=True, poll_interval_s=0.02))
    consumer = await client.subscribe(channel, "reader", SubscriptionPosition.EARLIEST)
    out("OPENED")
    last = None
    for _ in range(expected):
        last = await asyncio.wait_for(consumer.receive(), TIMEOUT_S)
        out("MSG", value(last.msg_id), last.payload.decode())
    late_consumer = await client.subscribe(late, "reader", SubscriptionPosition.EARLIEST)
    for _ in range(late_expected):
        msg = await asyncio.wait_for(late_consumer.receive(), TIMEOUT_S)
        out("LATE", value(msg.msg_id), msg.payload.decode())
    try:
        await client.create_producer(channel)
    except Exception as exc:
        out("PRODUCE", type(exc).__name__)
    else:
        out("PRODUCE", "allowed")
    out("READY_TO_ACK")
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    assert last is not None
    await consumer.ack(last)
    store = client.store
    assert isinstance(store, RocksStore)
    sub = store.get_subscription(channel, "reader")
    out("ACKED", None if sub is None else sub.next_id)
    await client.close()


def main(argv: list[str]) -> None:
    mode, path, *args = argv
    if mode == "produce":
        asyncio.run(produce(path, args[0] == "1", args[1:]))
    elif mode == "ack":
        asyncio.run(ack(path, args[0], int(args[1]), int(args[2]), *args[3:]))
    elif mode in ("own", "own-fork"):
        asyncio.run(own(path, fork=mode == "own-fork"))
    elif mode == "read":
        asyncio.run(read(path, args[0], int(args[1]), args[2], int(args[3])))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
