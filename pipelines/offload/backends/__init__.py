"""Built-in offload backends (pipelines/offload/ loads each when it is first named)."""
