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
