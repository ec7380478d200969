"""Generated README and docs blocks: written from committed records and sources, kept in sync by tests."""
