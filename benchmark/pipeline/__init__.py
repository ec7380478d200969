"""Stage logic behind the thin scripts in ``pipelines/`` (one module per stage)."""
