"""Storage: all file I/O (logits, tables, JSON), atomic writes, the results table's schema, DVC remotes."""
