"""The ``rocksmq`` configuration section and where the store lives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from msgstream.configuration.config_keys import Special
from msgstream.configuration.limits import MiB
from msgstream.configuration.sections import Count, Seconds, Section

__all__ = ["RocksmqConfig", "Sharing", "default_rocksmq_path"]

Sharing = Literal["auto", "exclusive", "read_only"]


class RocksmqConfig(Section):
    """The embedded store (rocksmq) backend."""

    SECTION: ClassVar[str] = "rocksmq"

    path: str | None = None
    """Directory of the embedded store; null means $XDG_DATA_HOME/msgstream/rocksmq (else
    ~/.local/share/msgstream/rocksmq)"""

    sharing: Sharing = "auto"
    """How this process shares the store with others: auto (the first process to open it
    owns it, later ones attach to that one through a socket in the store's directory and
    take over when it ends), exclusive (this process alone: another one gets
    StoreLockedError) or read_only (follow it through a RocksDB secondary instance: never
    writes, never owns)"""

    sync: bool = False
    """fsync the store on every produce"""

    page_size_bytes: Count = 64 * MiB
    """Size of one retention page, in bytes"""

    retention_max_age_s: Annotated[float, Field(ge=0), Special(-1, "keep forever")] = 259200.0
    """Seconds an acknowledged page is kept after it closed"""

    retention_max_size_bytes: Annotated[int, Field(ge=0), Special(-1, "unlimited")] = -1
    """Channel size (all retained bytes) above which its oldest acknowledged pages go"""

    retention_check_interval_s: Seconds = 60.0
    """Seconds between retention sweeps"""

    subscription_idle_expiry_s: Annotated[float, Field(ge=0), Special(-1, "never")] = 604800.0
    """Seconds after which an idle subscription is dropped"""

    compaction_interval_s: Seconds = 3600.0
    """Seconds between store compactions"""

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
