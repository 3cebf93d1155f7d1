"""Error names: the 0.1 names without ``Error`` still import, with a warning."""

from __future__ import annotations

import pytest


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
