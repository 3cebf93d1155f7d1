"""Real brokers for the test suite, started without Docker (test infrastructure only)."""
