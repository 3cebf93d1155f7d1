"""The ``rocksmq`` configuration section and where the store lives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field

from msgstream.config_keys import Special
from msgstream.sections import Count, Seconds, Section

__all__ = ["RocksmqConfig", "default_rocksmq_path"]


class RocksmqConfig(Section):
    """The embedded store (rocksmq) backend."""

    SECTION: ClassVar[str] = "rocksmq"

    path: str | None = Field(
        default=None,
        description=(
            "Directory of the embedded store; null means $XDG_DATA_HOME/msgstream/rocksmq"
            " (else ~/.local/share/msgstream/rocksmq). Setting it makes mq.type 'default'"
            " pick rocksmq"
        ),
    )

    sync: bool = Field(default=False, description="fsync the store on every produce")

    page_size_bytes: Count = Field(
        default=67108864, description="Size of one retention page, in bytes"
    )

    retention_max_age_s: Annotated[float, Special(-1, "keep forever")] = Field(
        default=259200.0, description="Seconds an acknowledged page is kept after it closed", ge=0
    )

    retention_max_size_bytes: Annotated[int, Special(-1, "unlimited")] = Field(
        default=-1,
        description=(
            "Channel size (all retained bytes) above which its oldest acknowledged pages go"
        ),
        ge=0,
    )

    retention_check_interval_s: Seconds = Field(
        default=60.0, description="Seconds between retention sweeps"
    )

    subscription_idle_expiry_s: Annotated[float, Special(-1, "never")] = Field(
        default=604800.0, description="Seconds after which an idle subscription is dropped", ge=0
    )

    compaction_interval_s: Seconds = Field(
        default=3600.0, description="Seconds between store compactions"
    )

    def resolved_path(self, env: Mapping[str, str] | None = None) -> str:
        """``rocksmq.path`` (with ``~`` expanded), or :func:`default_rocksmq_path`."""
        if self.path is not None:
            return os.path.expanduser(self.path)
        return default_rocksmq_path(env)


def default_rocksmq_path(env: Mapping[str, str] | None = None) -> str:
    """``$XDG_DATA_HOME/msgstream/rocksmq``, or ``~/.local/share/msgstream/rocksmq``.

    Per the XDG spec, an unset, empty or relative ``XDG_DATA_HOME`` is ignored.
    """
    if env is None:
        env = os.environ
    xdg = env.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return str(base / "msgstream" / "rocksmq")
