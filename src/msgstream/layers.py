"""The layer folders of msgstream's source, lowest first.

The modules of ``msgstream`` and of its Spark bridge sit in one sub-package per layer of
their import graph; a module imports only from its own layer and the layers before it
(``tests/test_import_graph.py`` holds the order, with the areas around these folders:
the root modules, the public API, the CLI, the benchmark harness, the backends).

A layer folder is a place in the source, not a part of the API users name: loggers leave
it out of their names (:func:`msgstream.observability.logs.logger_name`).
"""

from __future__ import annotations

LAYER_FOLDERS: tuple[str, ...] = (
    "msgstream.runtime",
    "msgstream.configuration",
    "msgstream.wire",
    "msgstream.observability",
    "msgstream.contract",
    "msgstream.timetick",
    "msgstream.streams",
    "msgstream.bridge_spark.process",
    "msgstream.bridge_spark.data",
)
"""Every layer sub-package, lowest first: the core's, then the Spark bridge's."""
