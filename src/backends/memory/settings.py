"""The ``memory`` configuration section."""

from __future__ import annotations

from typing import ClassVar

from msgstream.configuration.sections import Section

__all__ = ["MemoryConfig"]


class MemoryConfig(Section):
    """The in-process memory backend (tests, examples)."""

    SECTION: ClassVar[str] = "memory"

    name: str = "default"
    """Name of the in-process broker; streams sharing a name see each other"""
