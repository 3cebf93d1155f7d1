"""Time ticks: the per-channel tick rules, the barrier that aligns channels into packs,
and stall detection."""
