"""The Spark bridge's data path: the driver-side micro-batcher, the streaming source and
its planner and slices, offsets, checkpoints, and packs and payloads to Arrow."""
