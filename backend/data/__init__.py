"""Data: load any supported format into canonical rows, check them, fix them.

Canonical row (DESIGN section 4): {"messages": [{"role", "content"}, ...]}.
"""
