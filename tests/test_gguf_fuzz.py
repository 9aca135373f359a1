"""Fuzzing the GGUF reader with hypothesis: truncated and mutated versions of a small valid file
(written by gguf-py's GGUFWriter) must either load or raise tffedu.GGUFError: never another
exception, a crash, a hang or a huge allocation. Each case is timed; each test says how many
cases it ran."""
import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from gguf import GGUFValueType as V

from tffedu.errors import GGUFError
from tffedu.gguf import GGUFFile
from tffedu.modelfile import inspect_model
from tffedu.quant import DEQUANTIZE, dequantize_tensor
from gguf_util import random_blocks, write_gguf
from timing import Stopwatch

MAX_CASE_S = 0.5     # CPU seconds ("well under a second"); typical is ~1 ms
SETTINGS = dict(max_examples=300, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> bytes:
    "A small valid GGUF: every kind of value, and F32, F16, Q8_0, Q4_K, Q6_K tensors."
    rng = np.random.default_rng(0)
    meta = {"t.u8": (7, V.UINT8), "t.i64": (-5, V.INT64), "t.f64": (0.5, V.FLOAT64),
            "t.bool": (True, V.BOOL), "t.str": ("héllo", V.STRING),
            "t.arr_str": (["a", "bc", "Ġd"], V.ARRAY, V.STRING),
            "t.arr_f32": ([1.0, 2.0], V.ARRAY, V.FLOAT32),
            "t.nested": ([[1, 2], [3]], V.ARRAY, V.ARRAY)}
    tensors = {"a": rng.standard_normal((2, 8)).astype(np.float32),
               "b": rng.standard_normal(4).astype(np.float16),
               "c": (random_blocks("Q8_0", 2, rng).reshape(1, -1), "Q8_0"),
               "d": (random_blocks("Q4_K", 1, rng).reshape(1, -1), "Q4_K"),
               "e": (random_blocks("Q6_K", 1, rng).reshape(1, -1), "Q6_K")}
    p = write_gguf(tmp_path_factory.mktemp("seed") / "seed.gguf", meta, tensors)
    data = p.read_bytes()
    assert len(data) < 2048
    GGUFFile(p).close()       # the seed itself is valid
    return data


class Runner:
    "Writes each case to one file, loads it, records outcome and time."

    def __init__(self, path):
        self.path, self.n, self.ok, self.worst = path, 0, 0, 0.0

    def __call__(self, data: bytes):
        self.path.write_bytes(data)
        clock = Stopwatch()
        try:
            with GGUFFile(self.path) as f:
                for name, ti in f.tensors.items():
                    f.raw(name)
                    if ti.type_name in DEQUANTIZE:
                        with np.errstate(all="ignore"):
                            dequantize_tensor(f, name)
                    try:
                        f.tensor(name)
                    except GGUFError:
                        pass      # a type tffedu.tensor lacks: reported as GGUFError, fine
            inspect_model(self.path)
            self.ok += 1
        except GGUFError:
            pass
        self.worst = max(self.worst, clock.cpu)
        self.n += 1
        assert not (slow := clock.over(MAX_CASE_S)), f"case {self.n} {slow}"

    def report(self, what: str, at_least: int):
        print(f"\n{what}: {self.n} cases ({self.ok} still loadable), slowest {self.worst * 1e3:.1f} ms of CPU")
        assert self.n >= at_least


@pytest.fixture
def runner(tmp_path):
    return Runner(tmp_path / "case.gguf")


def test_every_truncation(seed, runner, tmp_path):
    "Exhaustive: every prefix of the file."
    (tmp_path / "seed.gguf").write_bytes(seed)
    ref = gguf.GGUFReader(tmp_path / "seed.gguf")
    end = max(t.data_offset + t.n_bytes for t in ref.tensors)   # after it: only padding
    for n in range(len(seed)):
        runner(seed[:n])
    runner.report("truncations", len(seed))
    assert runner.ok == len(seed) - end     # exactly the prefixes that keep all tensor data load


def test_huge_values_everywhere(seed, runner):
    "Exhaustive: at every byte offset, overwrite 4 or 8 bytes with a huge count/length/offset."
    for width, value in [(8, 2**64 - 1), (4, 2**32 - 1)]:
        patch = value.to_bytes(width, "little")
        for at in range(len(seed) - width + 1):
            runner(seed[:at] + patch + seed[at + width:])
    runner.report("huge values", 2 * (len(seed) - 8))


def test_random_byte_mutations(seed, runner):
    @settings(**SETTINGS)
    @given(st.lists(st.tuples(st.integers(0, len(seed) - 1), st.integers(0, 255)),
                    min_size=1, max_size=8))
    def case(edits):
        b = bytearray(seed)
        for at, v in edits:
            b[at] = v
        runner(bytes(b))
    case()
    runner.report("byte mutations", SETTINGS["max_examples"])


def test_random_splices(seed, runner):
    "Delete, duplicate or insert random spans: offsets and lengths shift out of step."
    @settings(**SETTINGS)
    @given(st.integers(0, len(seed)), st.integers(0, 64), st.binary(max_size=32),
           st.sampled_from(["delete", "insert", "duplicate"]))
    def case(at, n, blob, op):
        if op == "delete":
            data = seed[:at] + seed[at + n:]
        elif op == "insert":
            data = seed[:at] + blob + seed[at:]
        else:
            data = seed[:at] + seed[at:at + n] * 2 + seed[at + n:]
        runner(data)
    case()
    runner.report("splices", SETTINGS["max_examples"])


def test_random_bytes(runner):
    "Arbitrary bytes after a valid magic and version."
    @settings(**SETTINGS)
    @given(st.binary(min_size=0, max_size=512), st.sampled_from([2, 3]))
    def case(body, version):
        runner(b"GGUF" + version.to_bytes(4, "little") + body)
    case()
    runner.report("random bodies", SETTINGS["max_examples"])
