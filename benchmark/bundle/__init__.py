"""Result bundles: pack a finished run (``submit``), check it against logits (``verify``),
build the static leaderboard site from all bundles (``publish``).

Modules: :mod:`~benchmark.bundle.intake` (the only reader of a bundle's files: links, sizes,
hashes), :mod:`~benchmark.bundle.strict` (its strict gzip, text, JSON, YAML and CSV parsers),
:mod:`~benchmark.bundle.manifest` (the manifest's fields),
:mod:`~benchmark.bundle.schema` (the bundle: identity, rows, :func:`~benchmark.bundle.schema.load_bundle`),
:mod:`~benchmark.bundle.pack`, :mod:`~benchmark.bundle.verify` (recompute, verification records),
:mod:`~benchmark.bundle.verify_checks` (the rows, costs and paired differences against the recomputed ones),
:mod:`~benchmark.bundle.recost` (costs and models.csv), :mod:`~benchmark.bundle.site`.
"""
