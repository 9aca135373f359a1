"""Chapter 02 exercises: aligning with bit operations (reference: integer arithmetic) and exit hooks
(reference: CPython's atexit, in a child process)."""
import contextlib
import io
import math
import re
import subprocess
import sys

import pytest


def test_ch02_1_align_up_pow2(impl):
    for align in (1, 2, 8, 64, 256, 4096):
        for n in list(range(0, 300)) + [4095, 4096, 4097, 10**9 + 7]:
            assert impl.align_up_pow2(n, align) == math.ceil(n / align) * align, (n, align)
    for bad in (0, 3, 48, -8):
        with pytest.raises(ValueError):
            impl.align_up_pow2(10, bad)


def test_ch02_2_shutdown(impl):
    "The reference is CPython's own atexit, run in a child process: the same order, the same errors."
    hooks_src = """
import sys
log = []
def mk(i, fail):
    def hook():
        print("hook", i, flush=True)
        if fail:
            raise RuntimeError(f"hook {i} failed")
    return hook
hooks = [mk(i, i in (1, 3)) for i in range(5)]
"""
    child = subprocess.run([sys.executable, "-c", hooks_src + "import atexit\nfor h in hooks: atexit.register(h)\n"],
                           capture_output=True, text=True, timeout=60)
    ref_order = [ln for ln in child.stdout.splitlines() if ln.startswith("hook")]
    ref_errors = re.findall(r"RuntimeError: (hook \d failed)", child.stderr)
    ns = {}
    exec(hooks_src, ns)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        errors = impl.shutdown(ns["hooks"])
    assert buf.getvalue().splitlines() == ref_order
    assert [str(e) for e in errors] == ref_errors
    assert impl.shutdown([]) == []


def _forward(hooks):
    errors = []
    for fn in hooks:
        try:
            fn()
        except Exception as e:
            errors.append(e)
    return errors


def _stops(hooks):
    for fn in reversed(hooks):
        fn()
    return []


WRONG = {"test_ch02_1_align_up_pow2": {"always-adds": {"align_up_pow2": lambda n, a: n + a - n % a}},
         "test_ch02_2_shutdown": {"first-registered-first": {"shutdown": _forward},
                                  "stops-at-an-error": {"shutdown": _stops}}}
