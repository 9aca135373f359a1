#!/usr/bin/env bash
# Everything that needs the GPU, in one device call (see the device wheels' README):
#   run(command="bash tools/gpu_check.sh [NOTEBOOK ...]", carry=[".whl"])
# 1. installs the carried wheels (PyCUDA, gguf, Jupyter kernel, nbval) into /tmp/site
#    (WHL_DIR=.carry/whl for a smaller set without the notebook stack),
# 2. precompiles the kernel variants in parallel, runs the gpu-marked tests (TESTS, default all of
#    tests/; PYTEST_ARGS to add, e.g. "-n 8 --dist loadfile"),
# 3. re-executes the given notebooks top to bottom on the GPU (tools/nbbuild.py, no export) and
#    runs them under nbval; executed notebooks and logs come back through $OUT.
set -uo pipefail
WHL_DIR=${WHL_DIR:-.whl}
. "$WHL_DIR/setup.sh" && export PYTHONPATH=$PYTHONPATH:$PWD
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYCUDA_CACHE_DIR=/tmp/pycuda-cache PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$PYCUDA_CACHE_DIR"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 benchmarks/bench_matmul.py --precompile 2>&1 | tail -2

echo "== gpu tests"
# shellcheck disable=SC2086
timeout "${TEST_LIMIT:-300}" python3 -m pytest -m gpu -q -rfE --tb=short -p no:cacheprovider -o addopts="" \
    ${PYTEST_ARGS:-} --continue-on-collection-errors ${TESTS:-tests} 2>&1 | tee "$OUT/gpu_tests.txt" | tail -40

for nb in "$@"; do
    echo "== notebook $nb"
    timeout "${NB_LIMIT:-200}" python3 tools/nbbuild.py --no-export "$nb" 2>&1 | tail -4
    cp "$nb" "$OUT/"
    timeout "${NB_LIMIT:-200}" python3 -m pytest --nbval-lax --nbval-current-env -q -p no:cacheprovider \
        -o addopts="" "$nb" 2>&1 | tail -2
done
