#!/usr/bin/env bash
# Everything that needs the GPU, in one go, on a Linux machine with an NVIDIA GPU, its driver and
# the CUDA toolkit, from a clone of the repository:
#
#     bash tools/gpu_check.sh [--out DIR] [NOTEBOOK ...]
#
# 1. the packages (tools/gpu_packages.sh): tffedu with its cuda extra, and for notebooks a Jupyter
#    kernel, nbclient and nbval, each unless it is there already; WHEELS=DIR takes them from a
#    folder of wheels instead of PyPI;
# 2. compiles the kernel variants in parallel, then runs every gpu-marked test (TESTS=... picks the
#    files, default tests/; PYTEST_ARGS adds options, e.g. "-n 8 --dist loadfile"; TEST_LIMIT=seconds,
#    default 1800). The real-weights test takes SmolLM2 cut to two blocks from TFFEDU_SMOLLM2_CUT, or
#    cuts the default model if it is in the cache (`tffedu generate "hi"` fetches it once);
# 3. re-executes the given notebooks top to bottom on the GPU, in place (tools/nbbuild.py, no
#    export; NB_LIMIT=seconds each, default 900), and checks them under nbval.
# The logs, nvidia-smi's line and copies of the executed notebooks go to --out DIR (default
# tmp/gpu_check). The exit status is non-zero when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=tmp/gpu_check
if [ "${1:-}" = "--out" ]; then OUT_DIR=${2:?--out needs a folder}; shift 2; fi
case "${1:-}" in -*) echo "usage: bash tools/gpu_check.sh [--out DIR] [NOTEBOOK ...]"; exit 2 ;; esac
mkdir -p "$OUT_DIR"
# shellcheck source=tools/gpu_packages.sh
. tools/gpu_packages.sh
if [ $# -gt 0 ]; then
    gpu_packages ipykernel=ipykernel nbclient=nbclient nbval=nbval matplotlib=matplotlib || exit 1
else
    gpu_packages || exit 1
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
status=0

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT_DIR/gpu.txt"
"$PYTHON" benchmarks/bench_matmul.py --precompile 2>&1 | tail -2

echo "== gpu tests"
# shellcheck disable=SC2086
timeout "${TEST_LIMIT:-1800}" "$PYTHON" -m pytest -m gpu -q -rfEs --tb=short -p no:cacheprovider -o addopts="" \
    ${PYTEST_ARGS:-} --continue-on-collection-errors ${TESTS:-tests} > "$OUT_DIR/gpu_tests.txt" 2>&1 || status=1
tail -40 "$OUT_DIR/gpu_tests.txt"

for nb in "$@"; do
    echo "== notebook $nb"
    timeout "${NB_LIMIT:-900}" "$PYTHON" tools/nbbuild.py --no-export "$nb" > "$OUT_DIR/$(basename "$nb" .ipynb).log" 2>&1 || status=1
    tail -4 "$OUT_DIR/$(basename "$nb" .ipynb).log"
    cp "$nb" "$OUT_DIR/"
    timeout "${NB_LIMIT:-900}" "$PYTHON" -m pytest --nbval-lax --nbval-current-env -q -p no:cacheprovider \
        -o addopts="" "$nb" 2>&1 | tail -2
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
exit $status
