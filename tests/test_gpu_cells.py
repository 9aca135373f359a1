"""The `%%gpu` cell magic (chapter 02): every GPU cell of the book carries it, it runs the cell where
a GPU answers, and elsewhere says why and shows the outputs saved with the notebook — so that
"Run All" in Jupyter goes on to the end without a GPU."""
import json
import pathlib

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import tffedu.device  # noqa: E402
from tffedu.errors import DeviceError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture
def shell():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "tffedu.device")
    yield ip
    InteractiveShell.clear_instance()


def no_gpu():
    raise DeviceError("PyCUDA works but finds no CUDA GPU")


def test_with_a_gpu_the_cell_runs_as_if_the_line_were_not_there(shell, monkeypatch):
    monkeypatch.setattr(tffedu.device, "cuda_context", lambda: None)
    with capture_output() as out:
        res = shell.run_cell("%%gpu\nx = 6\nprint('ran')\nx * 7")
    assert res.success and res.result == 42 and shell.user_ns["x"] == 6 and out.stdout.startswith("ran\n")
    assert shell.run_cell("%%gpu\ny = 1\ny;").result is None               # ; hides the value
    res = shell.run_cell("%%gpu\nz = 1\nraise ValueError('inside the cell')")
    assert not res.success and isinstance(res.error_in_exec, ValueError)   # the cell's own error
    assert shell.user_ns["z"] == 1


def test_without_a_gpu_it_says_why_and_shows_the_saved_outputs(shell, monkeypatch, tmp_path):
    monkeypatch.setattr(tffedu.device, "cuda_context", no_gpu)
    source = "%%gpu\nx = 6\nprint('ran')"
    png = "iVBORw0KGgo="                                                    # what the file holds
    nb = {"cells": [{"cell_type": "code", "source": [source], "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["from the GPU run\n"]},
        {"output_type": "display_data", "data": {"image/png": png, "text/plain": ["<Figure>"]},
         "metadata": {}}]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "ch.ipynb"
    path.write_text(json.dumps(nb))
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))                     # as JupyterLab sets it
    with capture_output() as out:
        res = shell.run_cell(source)
    assert res.success and "x" not in shell.user_ns
    assert out.stdout.startswith("[%%gpu] not run: PyCUDA works but finds no CUDA GPU.")
    assert "from the GPU run" in out.stdout and out.outputs[0].data["image/png"] == png
    monkeypatch.delenv("JPY_SESSION_NAME")                                  # no file known: no outputs
    with capture_output() as out:
        assert shell.run_cell(source).success
    assert "notebook file and the book" in out.stdout and not out.outputs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_gpu_cell_says_so(path):
    "A `gpu` tag (read by the tests) and `%%gpu` (read by Jupyter) go together, the magic loaded first."
    cells = json.loads(path.read_text())["cells"]
    code = [("".join(c["source"]), "gpu" in c["metadata"].get("tags", [])) for c in cells
            if c["cell_type"] == "code"]
    for i, (src, tagged) in enumerate(code):
        assert src.startswith("%%gpu") == tagged, f"{path.name}: code cell {i}: tag and %%gpu disagree"
        if tagged:
            assert any("%load_ext tffedu.device" in s for s, _ in code[:i]), f"{path.name}: no %load_ext before cell {i}"


GPU_NOTEBOOKS = [p for p in NOTEBOOKS if '"%%gpu' in p.read_text()]


@pytest.mark.parametrize("path", GPU_NOTEBOOKS, ids=[p.stem for p in GPU_NOTEBOOKS])
def test_run_all_without_a_gpu(path):
    """What "Run All" does in Jupyter (nbclient: no tags consulted, no cell skipped by the tests):
    top to bottom without an error, each GPU cell saying it was not run."""
    from conftest import gpu_available
    if gpu_available():
        pytest.skip("a GPU is here: the notebooks run whole under nbval")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    for c in nb.cells:
        if c.cell_type == "code" and c.source.startswith("%%gpu"):
            assert c.outputs[0]["text"].startswith("[%%gpu] not run:"), c.source[:80]
