"""Command-line tools: ``tilecraft-opt`` (``tools/opt.py``)."""
