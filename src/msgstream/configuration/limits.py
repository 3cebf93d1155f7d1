"""Size limits that more than one layer applies, each named once.

The stream options' defaults live in the configuration model
(:class:`~msgstream.configuration.config.MsgStreamConfig`); what is here is below the configuration:
the codec, the backends' clients and the embedded store's socket use it too.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "MiB"]

MiB = 1024 * 1024
"""One mebibyte: sizes are written as multiples of it."""

DEFAULT_MAX_MESSAGE_BYTES = 64 * MiB
"""The largest encoded message accepted when none is configured
(``msgstream.max_message_bytes``): the codec's decode limit, the clients' send limit and
the smallest frame the embedded store's socket takes."""
