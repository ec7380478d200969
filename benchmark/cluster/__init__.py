"""The pipeline on a Slurm cluster: ``python -m benchmark cluster submit`` fans a suite's DVC stages out as jobs.

:mod:`~benchmark.cluster.pipeline` reads which stages of a ``dvc.yaml`` are not up to date and their DAG (DVC's
own API), :mod:`~benchmark.cluster.config` the resources of each stage's job (params ``cluster``),
:mod:`~benchmark.cluster.submit` submits one job per stage with ``afterok`` dependencies through
:mod:`~benchmark.cluster.slurm` (a thin layer over ``sbatch``/``squeue``/``scancel``), and
:mod:`~benchmark.cluster.job` is what each job runs: the stage as ``dvc repro`` runs it, recorded in ``dvc.lock``
only when its inputs did not change meanwhile. :mod:`~benchmark.cluster.runs` keeps a run's folder (logs, each
job's record, status); :mod:`~benchmark.cluster.local` starts a one-node cluster on this machine and
:mod:`~benchmark.cluster.check` runs a pipeline through it against a serial run (tests, CI). How-to:
docs/how-to/cluster.md.
"""
