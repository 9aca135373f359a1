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
