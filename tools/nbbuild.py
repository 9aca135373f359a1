#!/usr/bin/env python3
"""Build chapter notebooks from jupytext percent sources, execute them top to bottom, export.

    python tools/nbbuild.py SRC.py [SRC.py ...] [--no-exec] [--timeout 600]

Each `NN_name.py` (jupytext percent format; `# %% tags=["gpu"]` marks GPU-only cells) becomes
`notebooks/NN_name.ipynb`, executed in a fresh kernel with the notebooks/ folder as working
directory. Cells tagged `gpu` run only when PyCUDA sees a GPU (elsewhere they stay unexecuted,
which nbval then skips) — unless the notebook already on disk holds outputs of the same gpu cell
(same source), from a run on the GPU machine: those are kept. Then `nbdev-export` rewrites tffedu/
from all notebooks. An existing .ipynb can be given instead of a .py: it is re-executed in place.
The kernel always draws with matplotlib's inline backend (whatever MPLBACKEND says), so every
plot cell keeps its picture.
"""
import argparse
import os
import pathlib
import subprocess
import sys

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
NBS = ROOT / "notebooks"
sys.path.insert(0, str(ROOT))


def gpu_available() -> bool:
    from tests.conftest import gpu_available as probe
    return probe()


def gpu_outputs(path: pathlib.Path) -> dict:
    "source -> (outputs, execution_count) of the executed gpu cells of a notebook on disk."
    if not path.exists():
        return {}
    old = nbformat.read(path, as_version=4)
    return {c.source: (c.outputs, c.execution_count) for c in old.cells
            if c.cell_type == "code" and "gpu" in c.metadata.get("tags", []) and c.execution_count}


def build(src: pathlib.Path, execute: bool, timeout: int) -> pathlib.Path:
    if src.suffix == ".py":
        import jupytext  # only needed for percent sources (the GPU machine lacks it)
        nb = jupytext.read(src)
        out = NBS / (src.stem + ".ipynb")
    else:
        nb = nbformat.read(src, as_version=4)
        out = src
    kept = gpu_outputs(out)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.pop("jupytext", None)
    for cell in nb.cells:
        cell.metadata.pop("lines_to_next_cell", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    try:
        if execute:
            run_gpu = gpu_available()
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(NBS)}})
            with client.setup_kernel():
                for i, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    if "gpu" in cell.metadata.get("tags", []) and not run_gpu:
                        if cell.source in kept:  # the outputs of the last run on the GPU machine
                            cell.outputs, cell.execution_count = kept[cell.source]
                        continue
                    try:
                        client.execute_cell(cell, i)
                    finally:
                        cell.metadata.pop("execution", None)  # timestamps: noise in diffs
    finally:  # written even when a cell fails, so the error can be read in the notebook
        nbformat.write(nb, out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sources", nargs="+", type=pathlib.Path)
    ap.add_argument("--no-exec", action="store_true")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--no-export", action="store_true", help="skip nbdev-export (e.g. on the GPU machine)")
    a = ap.parse_args()
    # the kernel inherits this: pictures are PNG outputs of the cells even where MPLBACKEND=Agg
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    for src in a.sources:
        print("built", build(src.resolve(), not a.no_exec, a.timeout).relative_to(ROOT))
    if not a.no_export:
        try:
            subprocess.run(["nbdev-export"], cwd=ROOT, check=True)
        except FileNotFoundError:
            print("nbdev-export not installed here: notebooks built, package not re-exported")


if __name__ == "__main__":
    main()
