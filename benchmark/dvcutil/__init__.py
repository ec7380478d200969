"""DVC-facing utilities that the reproducibility checks, tuning and the cluster share: a ``dvc.lock`` read, compared
and rewritten in DVC's own format (:mod:`.lockfile`), scratch copies of a checkout to rerun stages in
(:mod:`.scratch`)."""
