"""Chapter 01: ModuleFactory policies, keys, errors, thread safety; OpRegistry dispatch."""
import enum
import gc
import threading

import pytest

from tffedu.errors import RegistryError, TffeduError
from tffedu.factory import OPS, ModuleFactory, OpRegistry, Policy


class Kind(enum.Enum):
    A = "a"
    B = 2


def test_prototype_makes_new_objects_and_passes_args():
    f = ModuleFactory("thing")
    f.register("box", lambda x=0: [x])
    a, b = f.create("box", 1), f.create("box", 2)
    assert a == [1] and b == [2] and a is not b
    assert f.policy("box") is Policy.PROTOTYPE


def test_singleton_shared_while_alive_and_rebuilt_after():
    built = []

    class S:
        def __init__(self):
            built.append(self)

    f = ModuleFactory()
    f.register("s", S, policy=Policy.SINGLETON)
    a = f.create("s")
    assert f.create("s") is a and len(built) == 1
    ida = id(a)
    del a
    built.clear()
    gc.collect()
    b = f.create("s")
    assert len(built) == 1 and b is built[0]  # a fresh object: the factory held it weakly
    del ida


def test_singleton_of_non_weakrefable_value_is_kept():
    f = ModuleFactory()
    f.register("n", lambda: (1, 2), policy=Policy.SINGLETON)
    assert f.create("n") is f.create("n")


def test_enum_and_string_keys():
    f = ModuleFactory()
    f.register(Kind.A, lambda: "A")
    f.register(Kind.B, lambda: "B")
    assert f.create("a") == "A" and f.create(Kind.A) == "A"   # str-valued enum == its value
    assert f.create(Kind.B) == "B" and Kind.B in f and 2 not in f
    with pytest.raises(RegistryError):
        f.create(2)  # non-str, non-enum keys are refused with a clear message


def test_decorator_registration_returns_the_class():
    f = ModuleFactory()

    @f.register("c")
    class C:
        pass

    assert isinstance(f.create("c"), C) and f.keys() == ["c"]


def test_duplicate_and_unknown_keys_are_clear_errors():
    f = ModuleFactory("allocator")
    f.register("cpu", object)
    with pytest.raises(RegistryError, match="already registered"):
        f.register("cpu", dict)
    f.register("cpu", dict, replace=True)
    assert f.create("cpu") == {}
    with pytest.raises(RegistryError, match=r"unknown allocator 'cpx'.*did you mean 'cpu'"):
        f.create("cpx")
    with pytest.raises(TffeduError):
        f.unregister("nope")
    with pytest.raises(RegistryError, match="not callable"):
        f.register("x", 42)
    with pytest.raises(RegistryError, match="Policy"):
        f.register("y", object, policy="singleton")


def test_singleton_creation_is_thread_safe():
    f = ModuleFactory()
    count = []
    start = threading.Barrier(12)

    def make():
        count.append(1)
        return object()

    f.register("one", make, policy=Policy.SINGLETON)
    results = []

    def worker():
        start.wait()
        results.append(f.create("one"))

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(count) == 1 and len({id(r) for r in results}) == 1


def test_op_registry_dispatch_and_errors():
    reg = OpRegistry()
    reg.register("add", "numpy", lambda a, b: a + b)
    assert reg("add", "numpy", 2, 3) == 5
    assert reg.backends("add") == ["numpy"] and reg.has("add", "numpy")
    assert not reg.has("add", "cuda")
    with pytest.raises(RegistryError, match="no 'cuda' implementation.*numpy"):
        reg.get("add", "cuda")
    with pytest.raises(RegistryError, match="did you mean 'add'"):
        reg.get("ad", "numpy")
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("add", "numpy", lambda a, b: 0)


def test_op_registry_loads_backend_modules_lazily(tmp_path, monkeypatch):
    mod = tmp_path / "fake_backend_mod.py"
    mod.write_text("from tffedu.factory import OPS\n"
                   "TEST_REG = None\n"
                   "def register(reg):\n    reg.register('neg', 'fake', lambda x: -x)\n"
                   "import tffedu_test_hook\ntffedu_test_hook.callback(register)\n")
    hook = tmp_path / "tffedu_test_hook.py"
    hook.write_text("callback = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import tffedu_test_hook
    reg = OpRegistry({"fake": ("fake_backend_mod", "module_that_does_not_exist_yet")})
    tffedu_test_hook.callback = lambda register: register(reg)
    assert reg.ops() == []                 # nothing imported yet
    assert reg.get("neg", "fake")(3) == -3  # first use imports the backend's modules
    assert reg.ops("fake") == ["neg"]


def test_importing_tffedu_does_not_import_pycuda():
    import subprocess
    import sys
    code = "import sys, tffedu, tffedu.factory; tffedu.factory.OPS.load_backend('cpu'); print('pycuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_global_registry_exists():
    assert isinstance(OPS, OpRegistry)


def test_every_backend_part_resolves_without_a_gpu():
    """Each device's record names its allocator, arena, view and lowering passes; every name
    resolves (a typo in the CUDA row shows here, on a machine with no GPU) and the CPU's are the
    objects the engine uses."""
    import subprocess
    import sys
    code = ("import sys; from tffedu.factory import BACKENDS\n"
            "for b in BACKENDS.values():\n"
            "    got = {k: b.part(k) for k, _ in b.parts}\n"
            "    assert set(got) == {'allocator', 'arena', 'view', 'lowering'}, got\n"
            "    assert got['allocator'].device == b.name and callable(got['arena']) and callable(got['view'])\n"
            "    assert isinstance(got['lowering'], list)\n"
            "print('pycuda' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"                      # naming CUDA's parts imports no PyCUDA
    from tffedu import lowering, memory, runtime
    from tffedu.factory import backend
    cpu = backend("cpu")
    assert cpu.part("allocator") is memory.CPUAllocator and cpu.part("arena") is runtime.cpu_arena
    assert backend("cuda").part("lowering") is lowering.CUDA_PASSES and cpu.part("lowering") == []
    with pytest.raises(RegistryError, match="has no 'stream'"):
        cpu.part("stream")
