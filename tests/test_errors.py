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


STORE_ERRORS = ("StoreError", "StorePathError", "StoreLockedError", "StoreCorruptedError")


def test_the_embedded_stores_errors_live_in_its_backend_and_import_as_before() -> None:
    """rocksmq's errors are its own module's; its spec names that module, so the names of
    0.1 (``msgstream.StoreError``, ``msgstream.errors.DiskFullError``) are the same
    classes, in the same hierarchy."""
    import msgstream
    from msgstream import errors
    from msgstream.backends.rocksmq import errors as store_errors
    from msgstream.errors import DiskFullError

    assert DiskFullError is store_errors.DiskFullError
    for name in (*STORE_ERRORS, "DiskFullError"):
        assert name not in vars(errors)
        assert getattr(msgstream, name) is getattr(errors, name) is getattr(store_errors, name)
        assert name in msgstream.__all__
        assert issubclass(getattr(store_errors, name), store_errors.StoreError)
    assert store_errors.StoreError.__mro__[1:3] == (
        errors.ProblemError,
        errors.BackendUnavailableError,
    )
    error = store_errors.StoreCorruptedError("/s", "a table block is damaged", "ids 5..9")
    assert str(error) == "rocksmq store at '/s': a table block is damaged; lost: ids 5..9"
    assert (error.path, error.lost) == ("/s", "ids 5..9")


def test_a_plugged_in_backends_errors_import_from_msgstream_errors() -> None:
    import dataclasses

    from msgstream import errors
    from plugin_backend import SPEC, TinyLogFullError, plugged_in

    with pytest.raises(AttributeError, match="no attribute 'TinyLogFullError'"):
        _ = errors.TinyLogFullError  # type: ignore[attr-defined]
    with plugged_in(dataclasses.replace(SPEC, errors="plugin_backend")):
        assert errors.TinyLogFullError is TinyLogFullError  # type: ignore[attr-defined]
        # only the names its module lists: an imported core error is not its own
        with pytest.raises(AttributeError, match="no attribute 'TinyLogConfig'"):
            _ = errors.TinyLogConfig  # type: ignore[attr-defined]
