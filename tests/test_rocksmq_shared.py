"""Several processes on one rocksmq store: ownership, attaching, hand-over, safety.

Every test runs real processes (``helpers/rocksmq_child.py own`` owns a store and does
nothing else; ``helpers/shared_child.py`` sends, holds a subscription or tails a
channel). Waits are on the children's output lines, on sockets and on the store's lock,
with generous deadlines; nothing sleeps and hopes. The whole-system run with repeated
owner kills is ``test_rocksmq_shared_chaos.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.rocksmq_child import Child
from msgstream import (
    BackendUnavailableError,
    SendOutcomeUnknownError,
    StoreLockedError,
    SubscriptionPosition,
    TopicNotFoundError,
)
from msgstream.backends.log_client.client import LogClient, RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore, doctor, open_client
from msgstream.backends.rocksmq.frames import (
    HEADER,
    VERSION,
    FrameDecoder,
    Op,
    encode,
)
from msgstream.backends.rocksmq.ownership import LOCK_NAME, SOCKET_NAME, OwnerInfo, read_owner
from msgstream.backends.rocksmq.remote import RemoteClient
from msgstream.backends.rocksmq.retention import RetentionPolicy

SHARED = str(Path(__file__).resolve().parent / "helpers" / "shared_child.py")
TIMEOUT_S = 30.0


def shared_child(*args: str, timeout_s: float | None = None) -> Child:
    if timeout_s is not None:
        os.environ["MSGSTREAM_TIMEOUT_S"] = str(timeout_s)
    try:
        return Child(*args, script=SHARED)
    finally:
        os.environ.pop("MSGSTREAM_TIMEOUT_S", None)


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[tuple[Path, Child]]:
    """A store owned by another process."""
    path = tmp_path / "store"
    child = Child("own", str(path))
    try:
        assert child.line(TIMEOUT_S) == f"OWNING {child.proc.pid}"
        yield path, child
    finally:
        child.close()


def mid(value: int) -> RocksmqMessageID:
    return RocksmqMessageID(value)


class RawClient:
    """A client speaking the frames by hand, over a blocking socket."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT_S)
        self.sock.connect(str(path / SOCKET_NAME))
        self.decoder = FrameDecoder(1 << 30)
        self.number = 0

    def call(self, op: Op, control: list[Any], blobs: list[bytes] | None = None) -> Any:
        self.number += 1
        self.sock.sendall(encode(op, self.number, control, blobs or []))
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionResetError("the owner closed the connection")
            frames = self.decoder.feed(data)
            if frames:
                (frame,) = frames
                assert frame.request == self.number
                return frame

    def closed_by_peer(self) -> bool:
        """Whether the owner closed the connection (waits for it, up to the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


# --- attaching -------------------------------------------------------------------------------
async def test_a_second_process_attaches_and_messages_go_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "store"
    client = open_client(str(path))
    assert isinstance(client, LogClient)  # the first process owns the store
    tail = sender = None
    try:
        producer = await client.create_producer("live")
        tail = shared_child("tail", str(path), "live")
        assert tail.line() == "SUBSCRIBED"
        assert await producer.send_many([b"a", b"b", b"c"]) == [mid(1), mid(2), mid(3)]
        assert [tail.line() for _ in range(3)] == ["GOT a", "GOT b", "GOT c"]

        consumer = await client.subscribe("live", "here", SubscriptionPosition.LATEST)
        sender = shared_child("send", str(path), "live", "3")
        assert sender.line() == "READY RemoteClient"
        assert [sender.line() for _ in range(3)] == ["ACK 4 1", "ACK 5 2", "ACK 6 3"]
        got = [await asyncio.wait_for(consumer.receive(), TIMEOUT_S) for _ in range(3)]
        assert [(m.msg_id, m.payload) for m in got] == [
            (mid(4), b"1"),
            (mid(5), b"2"),
            (mid(6), b"3"),
        ]
        assert [tail.line() for _ in range(3)] == ["GOT 1", "GOT 2", "GOT 3"]
        subs = sorted((s.name, s.acked_id) for s in await client.list_subscriptions("live"))
        assert subs == [("here", mid(3)), ("tail", mid(0))]
    finally:
        for child in (tail, sender):
            if child is not None:
                child.close()
        await client.close()


async def test_an_attached_client_has_the_whole_api(owner: tuple[Path, Child]) -> None:
    path, _ = owner
    client = open_client(str(path))
    assert isinstance(client, RemoteClient)
    try:
        producer = await client.create_producer("api")
        assert await producer.send(b"one", {"k": "v"}) == mid(1)
        assert await producer.send_many([b"two", b"three"]) == [mid(2), mid(3)]
        assert await client.list_channels() == ["api"]
        assert await client.get_latest_msg_id("api") == mid(3)
        assert await client.retained_messages("api") == (mid(1), 3)
        assert await client.peek("api", mid(2)) == b"two"
        assert await client.peek("api", mid(9)) is None
        consumer = await client.subscribe("api", "s", SubscriptionPosition.EARLIEST)
        first = await consumer.receive()
        assert (first.msg_id, first.payload, dict(first.properties)) == (mid(1), b"one", {"k": "v"})
        await consumer.seek(mid(3), inclusive=True)
        assert (await consumer.receive()).payload == b"three"
        await consumer.ack(first)
        (info,) = await client.list_subscriptions("api")
        assert (info.name, info.acked_id, info.lag) == ("s", mid(1), 2)
        await consumer.close()
        await client.delete_subscription("api", "s")
        assert await client.list_subscriptions("api") == []
        await client.delete_channel("api")
        with pytest.raises(TopicNotFoundError):
            await client.check_topic_valid("api")
    finally:
        await client.close()


def test_an_application_on_uvloop_attaches(owner: tuple[Path, Child]) -> None:
    """uvloop's transports are not asyncio.Transport subclasses, and its sockets read
    into buffers the same way: the attached side must not care which loop runs it."""
    uvloop = pytest.importorskip("uvloop")
    path, _ = owner
    big = [bytes([n]) * (300 * 1024) for n in range(8)]  # a 2.4 MB reply: several reads

    async def attached() -> list[tuple[RocksmqMessageID, bytes]]:
        assert not isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop)
        client = open_client(str(path))
        assert isinstance(client, RemoteClient)
        try:
            producer = await client.create_producer("uv")
            assert await producer.send(b"one") == mid(1)
            assert await producer.send_many(big) == [mid(n) for n in range(2, 10)]
            consumer = await client.subscribe("uv", "s", SubscriptionPosition.EARLIEST)
            got = []
            for _ in range(9):
                msg = await asyncio.wait_for(consumer.receive(), TIMEOUT_S)
                got.append((RocksmqMessageID.of(msg.msg_id), msg.payload))
            return got
        finally:
            await client.close()

    got = uvloop.run(attached())
    assert got == [(mid(1), b"one"), *((mid(n + 2), p) for n, p in enumerate(big))]


@pytest.mark.parametrize("address_bytes", [107, 108, 250])
async def test_a_store_path_of_any_length_is_shared(tmp_path: Path, address_bytes: int) -> None:
    """A Unix socket's address holds 107 bytes: ``<store>/owner.sock`` exactly that long
    (where the name it is first bound under is longer), one byte more, and far more."""
    base = str(tmp_path)
    padding = address_bytes - len(os.fsencode(os.path.join(base, "x", SOCKET_NAME))) + 1
    path = Path(base, "s" * padding)
    assert len(os.fsencode(os.path.join(path, SOCKET_NAME))) == address_bytes
    client = open_client(str(path))
    assert isinstance(client, LogClient)
    sender = None
    try:
        producer = await client.create_producer("live")
        assert await producer.send(b"own") == mid(1)
        sender = shared_child("send", str(path), "live", "2")
        assert sender.line() == "READY RemoteClient"
        assert [sender.line() for _ in range(2)] == ["ACK 2 1", "ACK 3 2"]
    finally:
        if sender is not None:
            sender.close()
        await client.close()


# --- safety ------------------------------------------------------------------------------------
def test_the_socket_is_the_owners_alone(owner: tuple[Path, Child]) -> None:
    path, child = owner
    assert stat.S_IMODE(os.stat(path / SOCKET_NAME).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(path / SOCKET_NAME).st_mode)
    assert stat.S_IMODE(os.stat(path / LOCK_NAME).st_mode) == 0o600
    info = read_owner(str(path))
    assert info is not None and (info.pid, info.sharing) == (child.proc.pid, "auto")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
# the forked child only makes system calls (setuid, connect, send, recv) before _exit
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_connection_from_another_user_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    """As user ``nobody``: the socket's mode stops the connection; with the mode opened
    up, the owner's peer-credential check still refuses it (and logs it)."""
    base = _reachable_directory()
    path = base / "store"
    client = open_client(str(path))
    try:
        await (await client.create_producer("ch")).send(b"x")
        address = str(path / SOCKET_NAME)
        assert _connect_as_nobody(address) == "refused by the socket's mode"
        os.chmod(address, 0o666)
        with caplog.at_level(logging.WARNING):
            assert _connect_as_nobody(address) == "closed by the owner"
        assert "refused a connection from uid 65534" in caplog.text
    finally:
        await client.close()
        shutil.rmtree(base)


def _reachable_directory() -> Path:
    """A new directory every user may enter (pytest's temporary directories are private)."""
    base = Path(tempfile.mkdtemp(prefix="msgstream-uid-"))
    base.chmod(0o755)
    return base


def _connect_as_nobody(address: str) -> str:
    outcomes = {3: "refused by the socket's mode", 4: "closed by the owner", 5: "answered"}
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 9
        try:
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT_S)
            try:
                sock.connect(address)
            except PermissionError:
                code = 3
            else:
                try:
                    sock.sendall(encode(Op.HELLO, 0, [VERSION, os.getpid()]))
                    code = 4 if sock.recv(1) == b"" else 5
                except (BrokenPipeError, ConnectionResetError):
                    code = 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return outcomes.get(code, f"exit {code}")


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        (b"\xff" * 64, "frame of 4294967295 bytes"),
        (HEADER.pack(HEADER.size - 4, 0x7E, 1, 0, 0), "unknown operation 0x7e"),
        (encode(Op.HELLO, 1, [VERSION]), "HELLO: expected 2 control field(s), got [1]"),
        (HEADER.pack(HEADER.size - 4 + 5, Op.HELLO, 1, 5, 0) + b"[1,2,", "control is not JSON"),
        (HEADER.pack(HEADER.size - 4 + 8, Op.APPEND, 1, 0, 9) + bytes(8), "do not fit"),
    ],
)
async def test_a_garbage_frame_closes_that_connection_only(
    owner: tuple[Path, Child], garbage: bytes, reason: str
) -> None:
    path, child = owner
    client = open_client(str(path))
    try:
        producer = await client.create_producer("ch")
        assert await producer.send(b"before") == mid(1)
        raw = RawClient(path)
        raw.sock.sendall(garbage)
        assert raw.closed_by_peer()
        raw.close()
        assert await producer.send(b"after") == mid(2)  # the owner and this client carry on
        consumer = await client.subscribe("ch", "s", SubscriptionPosition.EARLIEST)
        assert [(await consumer.receive()).payload for _ in range(2)] == [b"before", b"after"]
    finally:
        await client.close()
    child.send_line("done")
    assert child.line() == "CLOSED"
    assert "closing the connection of process" in child.stderr()
    assert reason in child.stderr()


# --- a hung owner --------------------------------------------------------------------------
async def test_a_stopped_owner_gives_typed_errors_at_the_timeout_then_recovers(
    owner: tuple[Path, Child],
) -> None:
    path, child = owner
    timeout = 1.0
    client = open_client(str(path), operation_timeout_s=timeout)
    try:
        producer = await client.create_producer("ch")
        assert await producer.send(b"1") == mid(1)
        consumer = await client.subscribe("ch", "s", SubscriptionPosition.LATEST)
        child.proc.send_signal(signal.SIGSTOP)
        # Stopped once all its threads are (a thread may answer until the stop reaches it).
        _, status = await asyncio.to_thread(os.waitpid, child.proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        try:
            started = time.monotonic()
            with pytest.raises(SendOutcomeUnknownError, match="it may have been stored"):
                await producer.send(b"2")
            took = time.monotonic() - started
            assert timeout * 0.9 <= took < timeout + 10, took
            with pytest.raises(BackendUnavailableError, match="did not answer"):
                await client.get_latest_msg_id("ch")
            with pytest.raises(BackendUnavailableError, match="did not answer"):
                await consumer.receive()
        finally:
            child.proc.send_signal(signal.SIGCONT)
        # The owner answers again (the send it read while stopped was stored).
        assert await producer.send(b"3") == mid(3)
        assert [(await consumer.receive()).payload for _ in range(2)] == [b"2", b"3"]
    finally:
        await client.close()


# --- processes that die -------------------------------------------------------------------
async def test_a_sender_killed_mid_send_leaves_exactly_its_acknowledged_messages(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    client = open_client(str(path))
    sender = shared_child("send", str(path), "ch", "-1")
    try:
        assert sender.line() == "READY RemoteClient"
        acked = [sender.line() for _ in range(200)]
        acked += [line for line in sender.kill() if line.startswith("ACK ")]
        stored = await client.get_latest_msg_id("ch")
        assert stored is not None
        consumer = await client.subscribe("ch", "s", SubscriptionPosition.EARLIEST)
        messages = [await consumer.receive() for _ in range(stored.value)]
        # every acknowledged send holds what was sent; at most the one in flight follows
        assert [f"ACK {m.msg_id.value} {m.payload.decode()}" for m in messages][
            : len(acked)
        ] == acked
        assert len(messages) - len(acked) <= 1
        assert [m.payload for m in messages] == [b"%d" % n for n in range(1, len(messages) + 1)]
        producer = await client.create_producer("ch")  # the owner carries on
        assert await producer.send(b"next") == mid(stored.value + 1)
    finally:
        sender.close()
        await client.close()


async def test_a_killed_owner_is_taken_over_and_a_retried_send_is_stored_once(
    owner: tuple[Path, Child],
) -> None:
    """A send whose answer the owner took with it: sent again (same producer, same
    sequence) to the next owner, it gets the ids it was stored under."""
    path, first = owner
    raw = RawClient(path)
    assert raw.call(Op.HELLO, [VERSION, os.getpid()]).control[1] == first.proc.pid
    raw.call(Op.ENSURE_CHANNEL, ["ch"])
    append = [Op.APPEND, ["ch", 7, 1, False, None], [b"once"]]
    assert raw.call(*append).control == [1]
    first.kill()
    raw.close()
    second = Child("own", str(path))  # takes the store over: RocksDB replays its log
    try:
        assert second.line(TIMEOUT_S) == f"OWNING {second.proc.pid}"
        raw = RawClient(path)
        raw.call(Op.HELLO, [VERSION, os.getpid()])
        assert raw.call(*append).control == [1]  # the retry: answered, not stored again
        assert raw.call(Op.APPEND, ["ch", 7, 2, False, None], [b"next"]).control == [2]
        assert raw.call(Op.LATEST, ["ch"]).control == [2]
        stale = raw.call(*append)  # older than the producer's last send: fate unknown
        assert (stale.op, stale.control[0]) == (Op.ERROR, "SendOutcomeUnknownError")
        raw.close()
    finally:
        second.close()


async def test_the_owner_killed_an_attached_sender_carries_on_within_the_deadline(
    owner: tuple[Path, Child],
) -> None:
    """The owner dies while the sender is mid-stream (200 sends, killed after the 30th
    answer); the sender's sends go on through whoever takes the store over. 20 sends it
    starts only after the kill prove the hand-over (lines the parent has not read yet may
    all predate the kill)."""
    path, first = owner
    tail = shared_child("tail", str(path), "ch")
    sender = None
    try:
        assert tail.line() == "SUBSCRIBED"
        sender = shared_child("send", str(path), "ch", "200")
        assert sender.line() == "READY RemoteClient"
        lines = [sender.line() for _ in range(30)]
        first.kill()
        killed = time.monotonic()
        while (line := sender.line()) != "SENT":
            lines.append(line)
        sender.send_line("20")
        while (line := sender.line()) != "SENT":
            lines.append(line)
        took = time.monotonic() - killed
        print(f"hand-over: 20 sends started after the kill were answered {took * 1000:.0f} ms on")
        assert took < 10.0
        assert lines == [line for line in lines if line.startswith("ACK ")]  # none failed
        assert [int(line.split()[2]) for line in lines] == list(range(1, 221))
        last_sent = 220
        got = 0
        while got < last_sent:  # the tail sees everything, in order, once
            got += 1
            assert tail.line() == f"GOT {got}"
        info = read_owner(str(path))
        assert info is not None and info.pid in (sender.proc.pid, tail.proc.pid)
    finally:
        if sender is not None:
            sender.close()
        tail.close()


async def test_an_owner_closing_its_last_client_hands_the_store_over(
    owner: tuple[Path, Child],
) -> None:
    path, first = owner
    client = open_client(str(path))
    assert isinstance(client, RemoteClient)
    try:
        consumer = await client.subscribe("ch", "s", SubscriptionPosition.LATEST)
        received = asyncio.ensure_future(consumer.receive())
        first.send_line("done")
        assert await asyncio.to_thread(first.line) == "CLOSED"  # it let go of the store
        # This process's next call finds nobody and takes the store over.
        assert await client.get_latest_msg_id("ch") is None
        assert read_owner(str(path)) == OwnerInfo(os.getpid(), "auto")
        sender = shared_child("send", str(path), "ch", "1")
        try:
            assert sender.line() == "READY RemoteClient"
            assert sender.line() == "ACK 1 1"
        finally:
            sender.close()
        msg = await asyncio.wait_for(received, TIMEOUT_S)
        assert (msg.msg_id, msg.payload) == (mid(1), b"1")
    finally:
        await client.close()
    assert read_owner(str(path)) is None  # and let go of it when done


async def test_a_forked_child_does_not_keep_a_dead_owners_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    parent = Child("own-fork", str(path))
    forked = None
    try:
        owning = parent.line(TIMEOUT_S)
        assert owning == f"OWNING {parent.proc.pid}"
        forked = int(parent.line().split()[1])
        client = open_client(str(path))
        assert isinstance(client, RemoteClient)
        producer = await client.create_producer("ch")
        parent.kill()
        assert await producer.send(b"x") == mid(1)  # taken over: the child held nothing
        assert read_owner(str(path)) == OwnerInfo(os.getpid(), "auto")
        await client.close()
    finally:
        if forked is not None:
            os.kill(forked, signal.SIGKILL)
        parent.close()


# --- retention -----------------------------------------------------------------------------
async def test_retention_keeps_what_another_processs_subscription_has_not_acknowledged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    options = RocksOptions(
        page_size=30,
        retention=RetentionPolicy(max_age_ms=-1, max_size=0),
        subscription_idle_expiry_ms=1,
    )
    client = open_client(str(path), options)
    assert isinstance(client, LogClient)
    store = client.store
    assert isinstance(store, RocksStore)
    holder = None
    try:
        producer = await client.create_producer("ch")
        for i in range(1, 31):  # 11 bytes stored each: a page closes every third message
            await producer.send(b"payload%03d" % i)
        holder = shared_child("hold", str(path), "ch", "other", "12")
        assert holder.line() == "ACKED 12"
        store.run_retention()
        # pages [1-3]..[10-12] were acknowledged by every subscription; 13 on was not
        assert store.first_readable("ch") == 13
        assert [(s.name, s.next_id) for s in store.list_subscriptions("ch")] == [("other", 13)]
        # Idle far beyond its 1 ms expiry, but open in the other process: kept.
        store.run_retention()
        assert [s.name for s in store.list_subscriptions("ch")] == ["other"]
        holder.kill()
        _round_trips(path, 2)  # the owner has seen that process's connection end
        store.run_retention()
        assert store.list_subscriptions("ch") == []
    finally:
        if holder is not None:
            holder.close()
        await client.close()


def _round_trips(path: Path, count: int) -> None:
    """Requests answered by the owner's serving thread: everything it had to do before
    (a connection that ended) is done after two of them."""
    raw = RawClient(path)
    try:
        for _ in range(count):
            raw.call(Op.HELLO, [VERSION, os.getpid()])
    finally:
        raw.close()


def test_doctor_checks_a_store_a_process_owns_but_does_not_repair_it(
    owner: tuple[Path, Child],
) -> None:
    path, child = owner
    assert doctor.check(str(path)).healthy
    with pytest.raises(StoreLockedError, match=f"process {child.proc.pid} owns the store"):
        doctor.repair(str(path))
    assert read_owner(str(path)) == OwnerInfo(child.proc.pid, "auto")  # still its owner
