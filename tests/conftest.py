"""Shared pytest setup: GPU detection and skipping of GPU-only tests and notebook cells.

Tests marked `@pytest.mark.gpu` and notebook cells tagged `gpu` (cell metadata) run only where
PyCUDA finds an NVIDIA GPU; everywhere else they are skipped, so CI (no GPU) stays green while the
GPU machine runs everything.
"""
import functools
import os
import pathlib

# One BLAS thread per process: the suite runs in parallel (pytest-xdist) on small machines, where
# oversubscribed OpenBLAS threads make a small matmul up to 100x slower. nbval kernels inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

# the exercise checks (tests/exercises): the `impl` fixture and its four parametrizations
import sys  # noqa: E402
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from exercise_harness import (impl, pytest_generate_tests, pytest_pyfunc_call,  # noqa: E402,F401
                              pytest_terminal_summary)

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


@functools.cache
def gpu_available() -> bool:
    if os.environ.get("TFFEDU_NO_GPU"):
        return False
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and PyCUDA")
    for item in items:
        cell = getattr(item, "cell", None)  # nbval's notebook-cell items carry the cell
        tags = cell.metadata.get("tags", []) if cell is not None else []
        if "gpu" in tags or item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


# An engine on the GPU takes 0.9 of the memory left (tffedu.engine.KV_MEMORY); the GPU suite runs
# a dozen processes side by side, each with several engines: each takes a small share instead.
import tffedu.engine  # noqa: E402
tffedu.engine.KV_MEMORY = 0.02


# nbval starts one Jupyter kernel per notebook. jupyter_client picks the kernel's five ports by
# binding and releasing them; on a busy machine (two xdist workers, the serve tests' connections)
# another process can take one before the kernel binds it, and the kernel dies at once ("Kernel died
# before replying to kernel_info"). A fresh start picks fresh ports: try three times.
try:
    import nbval.kernel as _nbval_kernel
except ImportError:
    _nbval_kernel = None
if _nbval_kernel is not None:
    _start_new_kernel = _nbval_kernel.start_new_kernel

    def _start_kernel_with_retries(*args, **kwargs):
        for attempt in range(3):
            try:
                return _start_new_kernel(*args, **kwargs)
            except RuntimeError:
                if attempt == 2:
                    raise

    _nbval_kernel.start_new_kernel = _start_kernel_with_retries
