"""Streams: background readers, ``MsgStream`` and ``TtMsgStream``, routing, the emitter,
the factory that builds them from configuration, and reader access for other processes."""
