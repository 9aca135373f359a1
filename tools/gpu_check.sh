#!/usr/bin/env bash
# Everything that needs the GPU, in one device call (see ../shared/device-wheels/README.md):
#   run(command="bash tools/gpu_check.sh [NOTEBOOK ...]", carry=[".whl"])
# 1. installs the carried wheels (PyCUDA, gguf, Jupyter kernel, nbval) into /tmp/site,
# 2. precompiles the matmul kernel variants in parallel, runs every gpu-marked test,
# 3. re-executes the given notebooks top to bottom on the GPU (tools/nbbuild.py, no export) and
#    runs them under nbval; executed notebooks and logs come back through $OUT.
set -uo pipefail
. .whl/setup.sh && export PYTHONPATH=$PYTHONPATH:$PWD
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYCUDA_CACHE_DIR=/tmp/pycuda-cache PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$PYCUDA_CACHE_DIR"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 benchmarks/bench_matmul.py --precompile 2>&1 | tail -2

echo "== gpu tests"
timeout "${TEST_LIMIT:-300}" python3 -m pytest -m gpu -q -rfE -p no:cacheprovider -o addopts="" \
    --continue-on-collection-errors tests 2>&1 | tee "$OUT/gpu_tests.txt" | tail -25

for nb in "$@"; do
    echo "== notebook $nb"
    timeout "${NB_LIMIT:-200}" python3 tools/nbbuild.py --no-export "$nb" 2>&1 | tail -4
    cp "$nb" "$OUT/"
    timeout "${NB_LIMIT:-200}" python3 -m pytest --nbval-lax --nbval-current-env -q -p no:cacheprovider \
        -o addopts="" "$nb" 2>&1 | tail -2
done
