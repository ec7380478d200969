"""The GPU check (``scripts/gpu-check.sh``): one prepared table of figures, stage checks through DVC and torchrun."""
