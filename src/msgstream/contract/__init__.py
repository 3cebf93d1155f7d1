"""The backend contract: what every backend's client, producer and consumer provide,
and what they share."""
