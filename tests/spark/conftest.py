"""Spark tests: one session for the whole run, and small embedded-store helpers."""

from __future__ import annotations

from spark.sessions import spark

__all__ = ["spark"]  # the session fixture, re-exported for pytest
