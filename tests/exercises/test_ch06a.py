"""Chapter 06a exercises: a tiny executor (reference: the same MLP written as numpy) and when
values can be freed (reference: brute force over the readers)."""
import numpy as np

OPS = {"matmul": lambda x, w: x @ w.T, "add": np.add, "mul": np.multiply,
       "silu": lambda x: x / (1 + np.exp(-x)), "scale": lambda x, s: x * s}
PROGRAM = [("g", "matmul", ["x", "wg"], {}), ("u", "matmul", ["x", "wu"], {}),
           ("a", "silu", ["g"], {}), ("h", "mul", ["a", "u"], {}), ("y", "matmul", ["h", "wd"], {}),
           ("r", "add", ["x", "y"], {}), ("z", "mul", ["y", "r"], {}), ("out", "scale", ["z"], {"s": 0.5})]


def test_ch06a_1_execute(impl):
    rng = np.random.default_rng(0)
    x, wg, wu, wd = rng.standard_normal((3, 8)), rng.standard_normal((16, 8)), rng.standard_normal((16, 8)), rng.standard_normal((8, 16))
    env = impl.execute(PROGRAM, OPS, {"x": x, "wg": wg, "wu": wu, "wd": wd})
    g, u = x @ wg.T, x @ wu.T
    y = (g / (1 + np.exp(-g)) * u) @ wd.T
    ref = 0.5 * y * (x + y)
    np.testing.assert_allclose(env["out"], ref)
    assert set(env) >= {"g", "u", "a", "h", "y", "r", "z", "out"}


def test_ch06a_2_frees_after(impl):
    got = impl.frees_after(PROGRAM, {"out"})
    made = [p[0] for p in PROGRAM]
    for i, name in enumerate(made):
        readers = [k for k, p in enumerate(PROGRAM) if name in p[2]]
        last = max(readers, default=i)
        for k in range(len(PROGRAM)):
            assert (name in got[k]) == (k == last and name != "out"), (name, k)
    assert all("x" not in step for step in got)


def _early(program, outputs):                   # frees after the first reader, not the last
    made = {p[0]: i for i, p in enumerate(program)}
    out = [[] for _ in program]
    for name, i in made.items():
        readers = [k for k, p in enumerate(program) if name in p[2]]
        if name not in outputs:
            out[min(readers, default=i)].append(name)
    return [sorted(x) for x in out]


WRONG = {"test_ch06a_2_frees_after": {"first-reader": {"frees_after": _early}}}
