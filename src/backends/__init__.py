"""Broker adapters for msgstream. Each backend module imports its broker library only
when it is itself imported; :mod:`msgstream.streams.factory` imports them lazily by name."""
