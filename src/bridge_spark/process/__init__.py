"""The Spark bridge's process runtime: the launcher of Spark's Python workers, the warm
runner and its client, and how the source's runner exits."""
