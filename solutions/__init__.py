"""Reference solutions of the exercises (`exercises/chNN.py` holds the learner's stubs).

CI runs every check in tests/exercises against these, and against stubs and wrong answers, which
must fail.
"""
import pathlib

KERNELS = pathlib.Path(__file__).parent / "kernels"    # the reference kernels of the GPU exercises


def kernel_file(name: str) -> str:
    "The path of the reference kernel `kernels/<name>`."
    return str(KERNELS / name)
