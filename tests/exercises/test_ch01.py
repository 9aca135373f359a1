"""Chapter 01 exercises: a backend fallback chain over an OpRegistry, and a thread-safe lazy value
(reference: Python's threads racing for it)."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tffedu.errors import RegistryError
from tffedu.factory import OpRegistry


def test_ch01_1_get_with_fallback(impl):
    reg = OpRegistry()
    reg.register("add", "cpu", lambda a, b: ("cpu", a + b))
    reg.register("add", "cuda", lambda a, b: ("cuda", a + b))
    reg.register("softmax", "cpu", lambda x: ("cpu", x))
    assert impl.get_with_fallback(reg, "add", ("cuda", "cpu"))(1, 2) == ("cuda", 3)
    assert impl.get_with_fallback(reg, "softmax", ("cuda", "cpu"))(1) == ("cpu", 1)
    assert impl.get_with_fallback(reg, "add", ("npu", "cpu"))(1, 2) == ("cpu", 3)
    with pytest.raises(RegistryError) as e:
        impl.get_with_fallback(reg, "rope", ("cuda", "cpu"))
    assert "rope" in str(e.value)


def test_ch01_2_once(impl):
    calls = []

    def make():
        calls.append(threading.get_ident())
        time.sleep(0.02)                      # a slow constructor widens the race
        return object()

    get = impl.once(make)
    barrier = threading.Barrier(32)

    def race(_):
        barrier.wait()
        return get()

    with ThreadPoolExecutor(32) as ex:
        got = list(ex.map(race, range(32)))
    assert len(calls) == 1 and len({id(g) for g in got}) == 1
    assert get() is got[0]


def _first_only(registry, op, backends):
    return registry.get(op, backends[0])


def _no_lock(fn):
    box = []

    def get():
        if not box:
            box.append(fn())
        return box[0]
    return get


WRONG = {"test_ch01_1_get_with_fallback": {"first-backend-only": {"get_with_fallback": _first_only}},
         "test_ch01_2_once": {"no-lock": {"once": _no_lock}}}
