"""The wire format and the message model: timestamps, positions, the envelope, the
bodies, messages, decode plans, the codec and packs."""
