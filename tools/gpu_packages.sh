# The Python packages a GPU run needs; sourced by tools/gpu_check.sh and benchmarks/race_llamacpp.sh.
#
#   gpu_packages [MODULE=REQUIREMENT ...]
#
# Installs the project with its `cuda` extra (pip install -e ".[cuda]") unless tffedu is installed
# and PyCUDA and gguf import, then each MODULE that does not import, as REQUIREMENT. With WHEELS=DIR
# every package comes from that folder of wheels instead of an index (for a machine without
# internet: pip install --no-index --find-links DIR --no-build-isolation, so setuptools comes from
# the environment). PYTHON=... picks the interpreter (default python3). Puts the CUDA toolkit's
# nvcc on PATH if it is not there (PyCUDA compiles the kernels with it).

PYTHON=${PYTHON:-python3}

_gpu_pip() {
    # shellcheck disable=SC2086
    "$PYTHON" -m pip install -q --disable-pip-version-check \
        ${WHEELS:+--no-index --find-links "$WHEELS" --no-build-isolation} "$@"
}

gpu_packages() {
    local root spec why
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if ! "$PYTHON" -c "import importlib.metadata as m; m.version('tffedu'); import pycuda.driver, gguf" 2>/dev/null; then
        echo "gpu_packages: pip install -e \".[cuda]\"${WHEELS:+ (from the wheels in $WHEELS)}"
        _gpu_pip -e "$root[cuda]" || { echo "gpu_packages: could not install tffedu[cuda]"; return 1; }
    fi
    for spec in "$@"; do
        "$PYTHON" -c "import ${spec%%=*}" 2>/dev/null && continue
        echo "gpu_packages: pip install ${spec#*=}"
        _gpu_pip "${spec#*=}" || { echo "gpu_packages: could not install ${spec#*=}"; return 1; }
    done
    if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
        export PATH=$PATH:/usr/local/cuda/bin
    fi
    command -v nvcc >/dev/null || { echo "gpu_packages: no nvcc: PyCUDA compiles the kernels with the CUDA toolkit's nvcc"; return 1; }
    # tffedu's own probe: its DeviceError says what is missing (PyCUDA, a driver, a GPU)
    why=$("$PYTHON" -c "from tffedu.device import cuda_context; cuda_context()" 2>&1) \
        || { echo "gpu_packages: no GPU to run on: ${why##*$'\n'}"; return 1; }
}
