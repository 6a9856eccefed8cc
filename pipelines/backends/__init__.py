"""Built-in offload backends (pipelines/offload.py loads each when it is first named)."""
