"""Which pages of a channel retention may delete: a pure policy, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Page:
    """A closed run of messages ``[first_id, last_id]`` holding ``size`` payload bytes."""

    first_id: int
    last_id: int
    size: int
    closed_ms: int


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    max_age_ms: int
    """Pages closed longer ago than this may go; -1 keeps them forever."""
    max_size: int
    """While a channel holds more bytes than this, its oldest pages may go; -1 = unlimited."""

    @property
    def enabled(self) -> bool:
        return self.max_age_ms >= 0 or self.max_size >= 0


def expired_pages(
    pages: Sequence[Page],
    open_page_size: int,
    acked_below: int | None,
    now_ms: int,
    policy: RetentionPolicy,
) -> list[Page]:
    """The oldest pages that every live subscription acknowledged and that are past the
    age limit or keep the channel over the size limit.

    ``pages`` are in id order; ``acked_below`` is the smallest ``next_id`` among live
    subscriptions (None when there are none: nothing pins the data, so age and size
    alone decide, as in a broker's log retention).
    """
    doomed: list[Page] = []
    total = sum(p.size for p in pages) + open_page_size
    for page in pages:
        if acked_below is not None and page.last_id >= acked_below:
            break
        too_old = policy.max_age_ms >= 0 and now_ms - page.closed_ms > policy.max_age_ms
        too_big = policy.max_size >= 0 and total > policy.max_size
        if not (too_old or too_big):
            break
        doomed.append(page)
        total -= page.size
    return doomed
