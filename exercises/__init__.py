"""Your answers to the chapters' exercises: one file per chapter, `exercises/chNN.py`.

Each function raises NotImplementedError until you write it. Check your answers with
`python -m tffedu.exercises chNN` (one line per exercise: not answered yet, correct, or wrong and
why); the reference solutions are in `solutions/chNN.py` — look only once you have tried.
"""
import pathlib

KERNELS = pathlib.Path(__file__).parent / "kernels"    # the GPU exercises' .cu files, yours to edit


def kernel_file(name: str, chapter: str) -> str:
    "The path of your kernel file `kernels/<name>`; NotImplementedError while it still says TODO."
    path = KERNELS / name
    if "// TODO: yours" in path.read_text():
        raise NotImplementedError(f"{chapter}: exercises/kernels/{name} is yours to write")
    return str(path)
