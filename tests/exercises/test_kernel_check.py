"""The GPU exercises' plumbing (kernel_check.py), on the CPU: an array passed to `launch_file` as a
temporary (`to_gpu(x)` in the call) lives until the kernel is done. It once did not: the list of
device addresses took the name of the arguments, the arrays were freed before the launch, and the
kernel read memory that was no longer ours (an illegal address on the GPU, depending on what ran
before)."""
import sys
import types
import weakref

import tffedu.ops.cuda as cuda
from kernel_check import launch_file


class FakeArray:
    gpudata = 0x1000


def test_launch_file_keeps_temporary_arrays_alive_until_the_kernel_is_done(monkeypatch):
    made, alive = [], []

    def array():
        a = FakeArray()
        made.append(weakref.ref(a))
        return a

    def seen(*_):
        alive.append(all(r() is not None for r in made))

    monkeypatch.setattr(cuda, "context", lambda: None)
    monkeypatch.setattr(cuda, "kernel", lambda *a: "k")
    monkeypatch.setattr(cuda, "ptr", lambda a: a.gpudata)
    monkeypatch.setattr(cuda, "launch", seen)
    pycuda = types.ModuleType("pycuda")
    pycuda.driver = types.SimpleNamespace(Context=types.SimpleNamespace(synchronize=seen))
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", pycuda.driver)
    launch_file("k.cu", "k", "PPi", (1,), (32,), array(), array(), 3)
    assert alive == [True, True], "an array was freed before its kernel ran or finished"
