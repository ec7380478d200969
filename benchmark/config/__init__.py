"""Configuration helpers: typed config blocks with field-level errors, reading YAML input, the report block,
process-wide runtime settings."""
