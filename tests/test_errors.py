"""Error names: the 0.1 names without ``Error`` still import, with a warning; a missing
channel's error suggests the closest existing names."""

from __future__ import annotations

import pytest

from msgstream.errors import TopicNotFoundError


def test_the_names_of_0_1_still_import_with_a_deprecation_warning() -> None:
    import msgstream
    from msgstream import errors

    with pytest.warns(DeprecationWarning, match="TopicNotFound is renamed TopicNotFoundError"):
        assert msgstream.TopicNotFound is errors.TopicNotFoundError  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="renamed InvalidChannelNameError"):
        from msgstream.errors import InvalidChannelName  # type: ignore[attr-defined]
    assert InvalidChannelName is errors.InvalidChannelNameError
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        _ = msgstream.NoSuchError  # type: ignore[attr-defined]


def test_a_missing_channel_suggests_the_closest_names_best_first() -> None:
    known = ["orders-1", "orders-2", "orders-3", "payments", "orders"]
    error = TopicNotFoundError("orderz-1", "memory", known)
    assert error.suggestions == ("orders-1", "orders-3", "orders-2")
    assert str(error) == (
        "channel 'orderz-1' does not exist on backend 'memory'; "
        "did you mean 'orders-1', 'orders-3' or 'orders-2'?"
    )
    one = TopicNotFoundError("payment", "rocksmq", known)
    assert str(one) == (
        "channel 'payment' does not exist on backend 'rocksmq'; did you mean 'payments'?"
    )


def test_no_suggestion_without_a_close_name_or_a_listing() -> None:
    far = TopicNotFoundError("zzz", "memory", ["orders-1", "payments"])
    assert (far.suggestions, far.hint) == ((), "")
    assert str(far) == "channel 'zzz' does not exist on backend 'memory'"
    assert str(TopicNotFoundError("orders-1")) == "channel 'orders-1' does not exist"
    # The channel itself in the listing (created meanwhile) is not suggested.
    assert TopicNotFoundError("a-1", "", ["a-1", "a-2"]).suggestions == ("a-2",)


def test_suggestions_are_worked_out_when_read_not_when_raised() -> None:
    """A caller waiting for a channel raises this on every look: the comparison with
    every known name is left to whoever reads the error."""
    error = TopicNotFoundError("orders-l", "memory", ["orders-1"])
    assert "suggestions" not in vars(error)
    assert error.hint == "did you mean 'orders-1'?"
    assert "suggestions" in vars(error)
