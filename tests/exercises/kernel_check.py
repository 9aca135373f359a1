"""The GPU exercises' plumbing (not an exercise): compile a kernel file — yours, the reference, or a
copy of the reference with a mistake — with chapter 10's loader, and launch it once."""
import pathlib
import tempfile

import numpy as np


def launch_file(path: str, name: str, sig: str, grid: tuple, block: tuple, *args) -> None:
    "Compile `path` (cached while the file is unchanged), launch kernel `name` once and wait."
    from tffedu.ops.cuda import context, kernel, launch, ptr
    context()
    # arrays go as device addresses; `args` keeps the arrays alive until the kernel is done (a
    # temporary such as `to_gpu(x)` in the call would otherwise be freed before the launch, and the
    # kernel would read memory that is no longer ours)
    addrs = [ptr(a) if hasattr(a, "gpudata") else a for a in args]
    launch(kernel(str(path), name, sig), grid, block, None, *addrs)
    import pycuda.driver as drv
    drv.Context.synchronize()


def to_gpu(a):
    "A copy of `a` on the GPU (chapter 10's context made current first)."
    import pycuda.gpuarray as ga
    from tffedu.ops.cuda import context
    context()
    return ga.to_gpu(np.ascontiguousarray(a))


def with_mistake(path: str, right: str, wrong: str) -> str:
    "A copy of the kernel file at `path` with `right` replaced by `wrong` (its path, in a new folder)."
    src = pathlib.Path(path).read_text()
    assert right in src, f"{right!r} is not in {path}"
    out = pathlib.Path(tempfile.mkdtemp()) / pathlib.Path(path).name
    out.write_text(src.replace(right, wrong))
    return str(out)
