"""Spark bridge: time-tick-aligned micro-batches of msgstream channels into Spark DataFrames."""
