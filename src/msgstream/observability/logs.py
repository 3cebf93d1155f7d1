"""Structured logging: every record of msgstream carries ``backend``, ``channel`` and
``subscription`` attributes (``extra`` fields), None where they do not apply.

Loggers follow the installed module names, less the layer folder a module sits in (see
:func:`logger_name`), so the hierarchy is the package's:
``msgstream`` above ``msgstream.stream``, ``msgstream.ttstream``, ``msgstream.barrier``,
``msgstream.reader``, ``msgstream.stall``, ``msgstream.emitter``, then
``msgstream.backends.<name>`` (``.client``, ``.store``, ...) per backend and
``msgstream.bridge_spark`` (``.batcher``, ``.source``, ...). Configure
``logging.getLogger("msgstream.backends.kafka")`` to hear from Kafka only.

A module gets its logger from :func:`get_logger`: a plain :class:`logging.Logger` with a
filter that sets the three attributes a call did not pass, so a JSON formatter can rely
on them. Calls that know their context pass it: ``log.warning(..., extra=fields(...))``.
"""

from __future__ import annotations

import logging

from ..layers import LAYER_FOLDERS

__all__ = ["FIELDS", "fields", "get_logger", "logger_name"]

FIELDS = ("backend", "channel", "subscription")
"""The context attributes every msgstream log record has."""


def fields(
    backend: str | None = None, channel: str | None = None, subscription: str | None = None
) -> dict[str, str | None]:
    """The ``extra`` of a log call made in that context (empty strings count as unknown)."""
    return {
        "backend": backend or None,
        "channel": channel or None,
        "subscription": subscription or None,
    }


class _ContextDefaults(logging.Filter):
    """Sets each of :data:`FIELDS` a record lacks to None; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = record.__dict__
        for name in FIELDS:
            if name not in values:
                values[name] = None
        return True


_DEFAULTS = _ContextDefaults()


def logger_name(module: str) -> str:
    """The name of ``module``'s logger: the module's name without the layer folder it sits
    in (:data:`~msgstream.layers.LAYER_FOLDERS`), as users configure them:
    ``msgstream.streams.stream`` logs as ``msgstream.stream``."""
    package, _, leaf = module.rpartition(".")
    if package in LAYER_FOLDERS:
        return f"{package.rpartition('.')[0]}.{leaf}"
    return module


def get_logger(name: str) -> logging.Logger:
    """The logger of the module ``name`` (its ``__name__``; see :func:`logger_name`), its
    records carrying :data:`FIELDS`."""
    logger = logging.getLogger(logger_name(name))
    if _DEFAULTS not in logger.filters:
        logger.addFilter(_DEFAULTS)
    return logger
