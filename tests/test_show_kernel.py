"""kernel_source / show_kernel (chapter 10): the book prints kernels whole. For every kernel of
every .cu file the text returned is a piece of the file that holds the whole function — from its
declaration (and the comment right above) to the brace that closes its body — and nothing after."""
import re

import pytest

from tffedu.errors import DeviceError
from tffedu.ops.cuda import kernel_source, kernels_dir

FILES = sorted(p.name for p in kernels_dir().glob("*.cu"))
GLOBAL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(')


def kernels():
    for f in FILES:
        for name in dict.fromkeys(GLOBAL.findall((kernels_dir() / f).read_text())):
            yield f, name


@pytest.mark.parametrize("file,name", list(kernels()))
def test_every_kernel_comes_out_whole(file, name):
    src = (kernels_dir() / file).read_text()
    got = kernel_source(file, name)
    at = src.index(got)                                    # a piece of the file, as written
    assert re.search(rf'__global__ void (?:__launch_bounds__\([^)]*\)\s*)?{name}\s*\(', got)
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", got, flags=re.S)
    assert body.count("{") == body.count("}") > 0 and got.endswith("}")
    assert at == 0 or src[at - 1] == "\n"                  # starts at the beginning of a line
    before = src[:at].split("\n")[-2].strip() if at else ""      # the line right above
    assert not before.startswith(("//", "extern", "template")), "the comment or declaration above was cut"


def test_a_missing_function_is_named():
    with pytest.raises(DeviceError, match="no function 'nope'"):
        kernel_source("rmsnorm.cu", "nope")
    with pytest.raises(DeviceError, match="no kernel source"):
        kernel_source("nope.cu", "rmsnorm_v1")


def show_kernel_cells():
    "A param (source, printed text), id notebook-cell, of every code cell that only prints kernels."
    import json
    import pathlib
    for nb in sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        for c in json.loads(nb.read_text())["cells"]:
            src = "".join(c["source"])
            calls = [ln for ln in src.splitlines() if ln.strip()]
            if c["cell_type"] != "code" or "show_kernel(" not in src:
                continue
            if not all(ln.startswith(("show_kernel(", " ", "print()", "from tffedu.ops.cuda import show_kernel"))
                       for ln in calls):
                continue
            text = "".join("".join(o["text"]) for o in c["outputs"] if o["output_type"] == "stream")
            yield pytest.param(src, text, id=f"{nb.stem}-{c.get('id')}")


@pytest.mark.parametrize("src,printed", list(show_kernel_cells()))
def test_the_book_prints_the_kernels_we_ship(src, printed, capsys):
    "A notebook's printed kernel is the .cu file as it is now: a kernel changed since is re-shown."
    from tffedu.ops.cuda import show_kernel
    exec(src, {"show_kernel": show_kernel})
    assert capsys.readouterr().out == printed, "stale kernel text: re-execute this show_kernel cell"
