"""rocksmq retention: the pure page policy, and the store applying it with subscriptions.

Store tests use 10-byte payloads (11 bytes stored with the flag byte) and a 30-byte page
size, so a page closes on every third message: pages [1-3], [4-6], [7-9], ...
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.log_client.store import now_ms
from msgstream.backends.rocksmq import RocksOptions, RocksStore, open_client
from msgstream.backends.rocksmq.retention import Page, RetentionPolicy, expired_pages
from msgstream.wire.position import SubscriptionPosition

CH = "ch"
PAGE_SIZE = 30
HOUR_MS = 3_600_000


def mid(value: int) -> RocksmqMessageID:
    return RocksmqMessageID(value)


def payload(i: int) -> bytes:
    return b"payload%03d" % i  # 10 bytes


# --------------------------------------------------------------------------- pure policy

NOW = 1_000_000
PAGES = [Page(1, 3, 100, NOW - 5000), Page(4, 6, 100, NOW - 3000), Page(7, 9, 100, NOW - 1000)]


def ids(pages: list[Page]) -> list[tuple[int, int]]:
    return [(p.first_id, p.last_id) for p in pages]


def test_policy_age_deletes_oldest_pages_past_max_age() -> None:
    policy = RetentionPolicy(max_age_ms=2000, max_size=-1)
    assert ids(expired_pages(PAGES, 0, None, NOW, policy)) == [(1, 3), (4, 6)]
    # Exactly max_age old is not yet past it.
    assert ids(expired_pages(PAGES, 0, None, NOW, RetentionPolicy(3000, -1))) == [(1, 3)]
    assert expired_pages(PAGES, 0, None, NOW, RetentionPolicy(5000, -1)) == []
    assert ids(expired_pages(PAGES, 0, None, NOW, RetentionPolicy(0, -1))) == [
        (1, 3),
        (4, 6),
        (7, 9),
    ]


def test_policy_age_stops_at_first_young_page() -> None:
    # An out-of-order younger page in the middle stops deletion: only a prefix goes.
    pages = [PAGES[0], Page(4, 6, 100, NOW), Page(7, 9, 100, NOW - 5000)]
    assert ids(expired_pages(pages, 0, None, NOW, RetentionPolicy(1000, -1))) == [(1, 3)]


def test_policy_size_deletes_until_under_limit_counting_open_page() -> None:
    policy = RetentionPolicy(max_age_ms=-1, max_size=250)
    # 300 closed bytes: drop one page -> 200 <= 250.
    assert ids(expired_pages(PAGES, 0, None, NOW, policy)) == [(1, 3)]
    # The open page counts too: 300 + 60 -> drop two pages -> 160.
    assert ids(expired_pages(PAGES, 60, None, NOW, policy)) == [(1, 3), (4, 6)]
    # Exactly at the limit is fine.
    assert expired_pages(PAGES, 0, None, NOW, RetentionPolicy(-1, 300)) == []
    # The open page itself is never a candidate, however big.
    assert ids(expired_pages(PAGES, 10_000, None, NOW, RetentionPolicy(-1, 0))) == ids(PAGES)


def test_policy_acked_pinning() -> None:
    policy = RetentionPolicy(max_age_ms=0, max_size=0)
    # Everything below 7 acknowledged: pages [1-3] and [4-6] may go, [7-9] is pinned.
    assert ids(expired_pages(PAGES, 0, 7, NOW, policy)) == [(1, 3), (4, 6)]
    # A page is deleted only when every one of its messages is acknowledged.
    assert ids(expired_pages(PAGES, 0, 6, NOW, policy)) == [(1, 3)]
    assert ids(expired_pages(PAGES, 0, 4, NOW, policy)) == [(1, 3)]
    assert expired_pages(PAGES, 0, 3, NOW, policy) == []
    assert expired_pages(PAGES, 0, 1, NOW, policy) == []
    assert ids(expired_pages(PAGES, 0, 10, NOW, policy)) == ids(PAGES)


def test_policy_no_subscriptions_age_and_size_alone_decide() -> None:
    assert ids(expired_pages(PAGES, 0, None, NOW, RetentionPolicy(4000, -1))) == [(1, 3)]
    assert ids(expired_pages(PAGES, 0, None, NOW, RetentionPolicy(-1, 100))) == [
        (1, 3),
        (4, 6),
    ]


def test_policy_minus_one_disables() -> None:
    policy = RetentionPolicy(max_age_ms=-1, max_size=-1)
    assert not policy.enabled
    assert RetentionPolicy(0, -1).enabled
    assert RetentionPolicy(-1, 0).enabled
    assert expired_pages(PAGES, 10**9, None, NOW + 10**12, policy) == []
    assert expired_pages(PAGES, 10**9, 100, NOW + 10**12, policy) == []


def test_policy_empty() -> None:
    assert expired_pages([], 500, None, NOW, RetentionPolicy(0, 0)) == []


# --------------------------------------------------------------------------- store level


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


def make_store(
    path: Path,
    *,
    max_age_ms: int = -1,
    max_size: int = -1,
    expiry_ms: int = -1,
) -> RocksStore:
    return RocksStore(str(path), make_options(max_age_ms, max_size, expiry_ms))


def make_options(max_age_ms: int = -1, max_size: int = -1, expiry_ms: int = -1) -> RocksOptions:
    return RocksOptions(
        page_size=PAGE_SIZE,
        retention=RetentionPolicy(max_age_ms=max_age_ms, max_size=max_size),
        subscription_idle_expiry_ms=expiry_ms,
    )


@pytest.fixture
def stores() -> Iterator[list[RocksStore]]:
    opened: list[RocksStore] = []
    yield opened
    for store in opened:
        store.close()


def filled(
    stores: list[RocksStore], path: Path, count: int = 10, **kwargs: int
) -> tuple[RocksStore, int]:
    store = make_store(path, **kwargs)
    stores.append(store)
    store.ensure_channel(CH)
    for i in range(1, count + 1):
        assert list(store.append(CH, [payload(i)], {})) == [i]
    return store, store._cid(CH)


def page_ids(store: RocksStore, cid: int) -> list[tuple[int, int, int]]:
    return [(p.first_id, p.last_id, p.size) for p in store._pages(cid)]


def retained(store: RocksStore) -> list[int]:
    return [r.msg_id for r in store.read(CH, 0, 1000)]


def test_pages_close_at_page_size(stores: list[RocksStore], store_path: Path) -> None:
    store, cid = filled(stores, store_path, 10)
    assert page_ids(store, cid) == [(1, 3, 30), (4, 6, 30), (7, 9, 30)]
    assert (store._open_pages[cid].first_id, store._open_pages[cid].size) == (10, 10)
    # A batch closes the page it fills, whatever its length.
    assert list(store.append(CH, [payload(11), payload(12), payload(13), payload(14)], {})) == [
        11,
        12,
        13,
        14,
    ]
    assert page_ids(store, cid)[-1] == (10, 14, 50)
    assert (store._open_pages[cid].first_id, store._open_pages[cid].size) == (15, 0)


def test_one_message_appends_page_and_number_as_append_does(
    stores: list[RocksStore], tmp_path: Path
) -> None:
    """``append_one``, a lone send's write, closes pages where ``append`` would, and what
    it stored reads back (ids, payloads, pages) after the store is reopened."""
    by_batch, cid = filled(stores, tmp_path / "batch", 10)
    by_one = make_store(tmp_path / "one")
    stores.append(by_one)
    by_one.ensure_channel(CH)
    assert [by_one.append_one(CH, payload(i)) for i in range(1, 11)] == list(range(1, 11))
    one_cid = by_one._cid(CH)
    assert (
        page_ids(by_one, one_cid) == page_ids(by_batch, cid) == [(1, 3, 30), (4, 6, 30), (7, 9, 30)]
    )
    assert (by_one._open_pages[one_cid].first_id, by_one._open_pages[one_cid].size) == (10, 10)
    by_one.close()
    reopened = make_store(tmp_path / "one")
    stores.append(reopened)
    assert [(r.msg_id, r.payload) for r in reopened.read(CH, 0, 100)] == [
        (i, payload(i)) for i in range(1, 11)
    ]
    assert page_ids(reopened, reopened._cid(CH)) == [(1, 3, 30), (4, 6, 30), (7, 9, 30)]
    assert reopened.append_one(CH, payload(11)) == 11


def test_retention_disabled_deletes_nothing(stores: list[RocksStore], store_path: Path) -> None:
    store, _ = filled(stores, store_path, 10)
    assert store.run_retention(now=now_ms() + 100 * HOUR_MS) == 0
    assert retained(store) == list(range(1, 11))


def test_retention_only_pages_acked_by_every_live_subscription(
    stores: list[RocksStore], store_path: Path
) -> None:
    store, cid = filled(stores, store_path, 10, max_age_ms=0)
    store.put_subscription(CH, "fast", 8)  # acked 1..7
    store.put_subscription(CH, "slow", 5)  # acked 1..4
    t = now_ms() + 1000
    assert store.run_retention(now=t) == 3  # only [1-3]: [4-6] holds 5 and 6 unacked
    assert retained(store) == list(range(4, 11))
    assert store.first_id(CH) == 4
    assert store.next_id(CH) == 11
    # The run closed the open page [10].
    assert page_ids(store, cid) == [(4, 6, 30), (7, 9, 30), (10, 10, 10)]

    store.put_subscription(CH, "slow", 11)  # now "fast" (next 8) is the slowest
    assert store.run_retention(now=t + 1000) == 3
    assert retained(store) == list(range(7, 11))
    assert store.run_retention(now=t + 2000) == 0
    store.put_subscription(CH, "fast", 11)
    assert store.run_retention(now=t + 3000) == 4
    assert retained(store) == []
    assert store.first_id(CH) is None
    assert store.last_id(CH) is None
    assert store.next_id(CH) == 11
    assert list(store.append(CH, [payload(11)], {})) == [11]
    assert retained(store) == [11]


def test_retention_by_age_without_subscriptions(stores: list[RocksStore], store_path: Path) -> None:
    store, _ = filled(stores, store_path, 9, max_age_ms=10_000)
    t = now_ms()
    assert store.run_retention(now=t + 5_000) == 0  # pages closed at most ~now: too young
    assert retained(store) == list(range(1, 10))
    assert store.run_retention(now=t + 20_000) == 9
    assert retained(store) == []
    assert store.next_id(CH) == 10
    assert list(store.append(CH, [payload(10)], {})) == [10]


def test_retention_by_size(stores: list[RocksStore], store_path: Path) -> None:
    store, cid = filled(stores, store_path, 10, max_size=50)
    # 100 bytes: [1-3] and [4-6] go (-> 40 bytes); the open page [10] was closed first.
    assert store.run_retention() == 6
    assert retained(store) == [7, 8, 9, 10]
    assert page_ids(store, cid) == [(7, 9, 30), (10, 10, 10)]
    assert store.run_retention() == 0


def test_unacked_subscription_pins_everything(stores: list[RocksStore], store_path: Path) -> None:
    store, _ = filled(stores, store_path, 10, max_age_ms=0, max_size=0)
    store.put_subscription(CH, "never-acks", 1)
    assert store.run_retention(now=now_ms() + 1000 * HOUR_MS) == 0  # expiry disabled
    assert retained(store) == list(range(1, 11))
    assert [s.name for s in store.list_subscriptions(CH)] == ["never-acks"]


def test_idle_subscription_expires_and_stops_pinning(
    stores: list[RocksStore], store_path: Path
) -> None:
    store, _ = filled(stores, store_path, 10, max_size=0, expiry_ms=60_000)
    store.put_subscription(CH, "idle", 1)
    t = now_ms()
    assert store.run_retention(now=t + 1000) == 0  # still fresh: pins the channel
    assert [s.name for s in store.list_subscriptions(CH)] == ["idle"]
    # An hour later it is past the expiry: it goes and, in the same run, stops pinning.
    assert store.run_retention(now=t + HOUR_MS) == 10
    assert store.list_subscriptions(CH) == []
    assert store.get_subscription(CH, "idle") is None
    assert retained(store) == []
    assert store.next_id(CH) == 11


class Clock:
    def __init__(self, start: int) -> None:
        self.ms = start

    def __call__(self) -> int:
        return self.ms


def test_only_the_idle_subscription_expires(
    stores: list[RocksStore], store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(now_ms())
    monkeypatch.setattr("msgstream.backends.rocksmq.store.now_ms", clock)
    store, _ = filled(stores, store_path, 10, max_age_ms=0, expiry_ms=60_000)
    t0 = clock.ms
    store.put_subscription(CH, "idle", 1)  # last active t0
    clock.ms = t0 + 50_000
    store.put_subscription(CH, "busy", 5)  # last active t0 + 50 s: acked 1..4
    assert store.run_retention(now=t0 + 60_000) == 0  # exactly at expiry: "idle" stays
    assert [s.name for s in store.list_subscriptions(CH)] == ["busy", "idle"]
    assert store.run_retention(now=t0 + 70_000) == 3  # "idle" gone; "busy" pins [4-6]
    assert [(s.name, s.next_id) for s in store.list_subscriptions(CH)] == [("busy", 5)]
    assert retained(store) == list(range(4, 11))
    assert store.run_retention(now=t0 + 110_001) == 7  # now "busy" expired as well
    assert store.list_subscriptions(CH) == []


async def test_open_consumer_is_never_expired(store_path: Path) -> None:
    client = open_client(str(store_path), make_options(max_size=0, expiry_ms=60_000))
    try:
        store = client.store
        assert isinstance(store, RocksStore)
        producer = await client.create_producer(CH)
        assert await producer.send_many([payload(i) for i in range(1, 11)]) == [
            mid(i) for i in range(1, 11)
        ]
        open_consumer = await client.subscribe(CH, "open", SubscriptionPosition.EARLIEST)
        closed_consumer = await client.subscribe(CH, "closed", SubscriptionPosition.EARLIEST)
        await closed_consumer.close()
        far = now_ms() + 10 * HOUR_MS
        assert store.run_retention(now=far) == 0  # "open" still at id 1
        assert [s.name for s in store.list_subscriptions(CH)] == ["open"]

        got = [await asyncio.wait_for(open_consumer.receive(), 5) for _ in range(4)]
        assert [m.msg_id for m in got] == [mid(i) for i in range(1, 5)]
        await open_consumer.ack(got[-1])
        # [1-10] was sent as one batch, so it is one page: acked 1..4 pins it all.
        assert store.run_retention(now=far + HOUR_MS) == 0
        assert [s.name for s in store.list_subscriptions(CH)] == ["open"]
        rest = [await asyncio.wait_for(open_consumer.receive(), 5) for _ in range(6)]
        assert [m.msg_id for m in rest] == [mid(i) for i in range(5, 11)]
        await open_consumer.ack(rest[-1])
        assert store.run_retention(now=far + 2 * HOUR_MS) == 10

        # A second open consumer of the same subscription keeps it pinned until both close.
        await producer.send(payload(11))
        again = await client.subscribe(CH, "open", SubscriptionPosition.EARLIEST)
        await open_consumer.close()
        assert store.run_retention(now=far + 3 * HOUR_MS) == 0
        assert [s.name for s in store.list_subscriptions(CH)] == ["open"]
        await again.close()
        assert store.run_retention(now=far + 4 * HOUR_MS) == 1
        assert store.list_subscriptions(CH) == []
    finally:
        await client.close()


async def test_reading_after_deletion_starts_at_first_retained(store_path: Path) -> None:
    client = open_client(str(store_path), make_options(max_age_ms=0))
    try:
        store = client.store
        assert isinstance(store, RocksStore)
        producer = await client.create_producer(CH)
        for i in range(1, 11):
            await producer.send(payload(i), {"i": str(i)})
        assert store.first_id(CH) == 1
        assert store.run_retention(now=now_ms() + 1000) == 10
        await producer.send_many([payload(11), payload(12)])
        assert store.first_id(CH) == 11
        assert store.next_id(CH) == 13

        earliest = await client.subscribe(CH, "new", SubscriptionPosition.EARLIEST)
        msg = await asyncio.wait_for(earliest.receive(), 5)
        assert (msg.msg_id, msg.payload) == (mid(11), payload(11))

        await earliest.seek(mid(3), inclusive=True)  # deleted: read from the first retained
        assert [m.msg_id for m in earliest.receive_nowait(10)] == [mid(11), mid(12)]
        await earliest.seek(mid(3), inclusive=False)
        assert [m.msg_id for m in earliest.receive_nowait(10)] == [mid(11), mid(12)]
        await earliest.seek_to_earliest()
        assert [m.msg_id for m in earliest.receive_nowait(10)] == [mid(11), mid(12)]
        await earliest.seek(mid(11), inclusive=False)
        assert [m.msg_id for m in earliest.receive_nowait(10)] == [mid(12)]
        assert await earliest.get_latest_msg_id() == mid(12)

        # A persisted cursor below the first retained id resumes at the first retained.
        store.put_subscription(CH, "old-cursor", 2)
        behind = await client.subscribe(CH, "old-cursor", SubscriptionPosition.LATEST)
        assert [m.msg_id for m in behind.receive_nowait(10)] == [mid(11), mid(12)]
    finally:
        await client.close()


def test_compact_reclaims_deleted_space(stores: list[RocksStore], store_path: Path) -> None:
    store = make_store(store_path, max_size=0)
    stores.append(store)
    store.ensure_channel(CH)
    rng = random.Random(7)
    for _ in range(300):
        store.append(CH, [rng.randbytes(4096)], {})  # incompressible
    store.compact()
    before = store.disk_usage()
    assert before > 300 * 4096 // 2
    assert store.run_retention() == 300
    store.compact()
    after = store.disk_usage()
    assert after < before // 10
    assert store.first_id(CH) is None
    assert store.next_id(CH) == 301


def test_reopen_after_retention_keeps_ids_and_open_page(
    stores: list[RocksStore], store_path: Path
) -> None:
    store, cid = filled(stores, store_path, 10, max_size=0)
    assert store.run_retention() == 10  # everything, including the open page [10]
    assert list(store.append(CH, [payload(11), payload(12)], {})) == [11, 12]
    store.close()

    store = make_store(store_path, max_size=0)
    stores.append(store)
    assert store.first_id(CH) == 11
    assert store.next_id(CH) == 13
    assert (store._open_pages[cid].first_id, store._open_pages[cid].size) == (11, 20)
    assert list(store.append(CH, [payload(13)], {})) == [13]  # 30 bytes: the page closes
    assert page_ids(store, cid) == [(11, 13, 30)]
    assert store.run_retention() == 3
    store.close()

    # Everything deleted, reopened: ids still do not restart at 1.
    store = make_store(store_path)
    stores.append(store)
    assert store.first_id(CH) is None
    assert store.last_id(CH) is None
    assert store.next_id(CH) == 14
    assert list(store.append(CH, [payload(14)], {})) == [14]


def test_reopen_mid_page_recovers_open_page(stores: list[RocksStore], tmp_path: Path) -> None:
    """A store reopened halfway through a page closes its pages where one never closed,
    each channel's open page counted apart from the channel stored after it."""
    reopened = make_store(tmp_path / "a")
    stores.append(reopened)
    steady = make_store(tmp_path / "b")
    stores.append(steady)
    sizes = [4, 7, 12, 3, 9, 1, 20, 5, 6, 2, 14, 8]
    for store in (reopened, steady):
        store.ensure_channel(CH)
        store.ensure_channel("next")
    for n, size in enumerate(sizes):
        for store in (reopened, steady):
            store.append(CH, [b"x" * size], {"n": str(n)} if n % 3 == 0 else {})
            store.append("next", [b"y"], {})
        if n % 4 == 1:
            reopened.close()
            stores.remove(reopened)
            reopened = make_store(tmp_path / "a")
            stores.append(reopened)
    cid_a, cid_b = reopened._cid(CH), steady._cid(CH)
    assert page_ids(reopened, cid_a) == page_ids(steady, cid_b)
    assert len(page_ids(steady, cid_b)) >= 3
    assert reopened._open_pages[cid_a] == steady._open_pages[cid_b]
    assert reopened.read(CH, 0, 100) == steady.read(CH, 0, 100)
    next_a, next_b = reopened._cid("next"), steady._cid("next")
    assert reopened._open_pages[next_a] == steady._open_pages[next_b]
    assert reopened._open_pages[next_a].size == len(sizes)  # one byte each, no page closed


def test_a_read_only_process_holds_what_it_has_not_consumed(
    stores: list[RocksStore], store_path: Path
) -> None:
    store, _ = filled(stores, store_path, 10, max_size=0, expiry_ms=60_000)
    reader = RocksStore(str(store_path), RocksOptions(read_only=True))
    stores.append(reader)
    reader.holds.put(CH, "spark", 5)  # a read-only store cannot write RocksDB: a hold file
    t = now_ms()
    assert store.run_retention(now=t + 1000) == 3  # page [1-3] only: [4-6] holds id 5
    assert retained(store) == list(range(4, 11))
    assert [(s.name, s.next_id) for s in store.list_subscriptions(CH)] == [("spark", 5)]
    reader.holds.put(CH, "spark", 8)  # the holder moved on
    assert store.run_retention(now=t + 2000) == 3
    assert retained(store) == [7, 8, 9, 10]
    assert reader.holds.delete(CH, "spark")  # released: nothing pins the channel now
    assert store.list_subscriptions(CH) == []
    assert store.run_retention(now=t + 3000) == 4
    assert retained(store) == []


def test_an_idle_hold_expires_like_a_subscription(
    stores: list[RocksStore], store_path: Path
) -> None:
    store, _ = filled(stores, store_path, 10, max_size=0, expiry_ms=60_000)
    store.holds.put(CH, "gone", 1)
    store.put_subscription(CH, "gone", 1)
    assert store.run_retention(now=now_ms() + HOUR_MS) == 10
    assert store.list_subscriptions(CH) == []
    assert store.holds.get(CH, "gone") is None


def test_deleting_a_subscription_releases_its_hold(
    stores: list[RocksStore], store_path: Path
) -> None:
    store, _ = filled(stores, store_path, 10, max_size=0)
    store.holds.put(CH, "q", 2)
    assert store.run_retention() == 0
    store.delete_subscription(CH, "q")
    assert store.holds.of_channel(CH) == []
    assert store.run_retention() == 10


def test_a_damaged_hold_names_itself(stores: list[RocksStore], store_path: Path) -> None:
    from msgstream.errors import StoreError

    store, _ = filled(stores, store_path, 3)
    store.holds.put(CH, "q", 2)
    Path(store.holds._file(CH, "q")).write_bytes(b"junk")
    with pytest.raises(StoreError, match="hold 'q' of channel 'ch' is not a hold file"):
        store.list_subscriptions(CH)
