"""Result bundles: pack a finished run (``submit``), check it against logits (``verify``),
build the static leaderboard site from all bundles (``publish``).

Modules: :mod:`~benchmark.bundle.schema` (files, manifest, row invariants),
:mod:`~benchmark.bundle.pack`, :mod:`~benchmark.bundle.verify`, :mod:`~benchmark.bundle.site`.
"""
