"""Configuration: the sections, their keys and errors, the backend plug-in registry
that ``mq.type`` chooses from, and the whole ``Config``."""
