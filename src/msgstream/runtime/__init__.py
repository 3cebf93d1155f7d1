"""The asyncio runtime helpers every layer uses: scopes, cooperative yielding, shutdown
on signals."""
