"""The commands the Spark bridge adds to ``msgstream`` (entry points ``msgstream.commands``):
``ingest`` and ``demo``, declared in :mod:`.commands`, run by :mod:`.ingest` and :mod:`.demo`
(imported, with PySpark, only when one of them runs)."""
