"""Observability: the instrumentation hooks, structured logging, Prometheus metrics and
OpenTelemetry traces."""
