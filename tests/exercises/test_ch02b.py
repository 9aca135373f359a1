"""Chapter 02b exercises: strides (reference: numpy, which computes them in bytes) and tensor sizes
(reference: gguf-py's GGML_QUANT_SIZES, llama.cpp's own table)."""
import itertools
import math

import gguf
import numpy as np
import pytest

from solutions.ch02b import BLOCKS

SHAPES = [(5,), (2, 3), (2, 3, 4), (4, 1, 6), (1, 7), (3, 2, 2, 5)]


def test_ch02b_1_contiguous_strides(impl):
    for shape in SHAPES:
        a = np.empty(shape, np.float32)
        assert tuple(impl.contiguous_strides(shape)) == tuple(s // 4 for s in a.strides), shape


def test_ch02b_2_tensor_nbytes(impl):
    for name in ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K"]:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]]
        for shape in [(4096, 4096), (151936, 1024), (3, 512), (2, 8, 256)]:
            assert impl.tensor_nbytes(shape, name) == math.prod(shape) // block * size, (name, shape)
        if block > 1:
            with pytest.raises(ValueError):
                impl.tensor_nbytes((4, block + 1), name)


def test_ch02b_3_broadcast_strides(impl):
    cases = [((3,), (4, 3)), ((4, 1), (4, 5)), ((1, 3), (2, 4, 3)), ((2, 1, 3), (2, 6, 3)), ((1,), (7,))]
    for shape, target in cases:
        a = np.empty(shape, np.float32)
        ref = tuple(s // 4 for s in np.broadcast_to(a, target).strides)
        got = tuple(impl.broadcast_strides(shape, tuple(s // 4 for s in a.strides), target))
        assert got == ref, (shape, target)
    with pytest.raises(ValueError):
        impl.broadcast_strides((3,), (1,), (4,))


def test_ch02b_4_view_strides(impl):
    base = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    checked = 0
    for perm in itertools.permutations(range(4)):
        a = base.transpose(perm)
        for new in [(6, 8), (2, 12, 2), (24, 2), (4, 12), (3, 16), (48,), (2, 3, 8)]:
            try:
                v = a.view()
                v.shape = new                    # numpy refuses when a copy is needed
                ref = tuple(s // 4 for s in v.strides)
            except AttributeError:
                ref = None
            shape = [n for n in a.shape]
            got = impl.view_strides(tuple(shape), tuple(s // 4 for s in a.strides), new)
            assert (None if got is None else tuple(got)) == ref, (perm, new)
            checked += ref is not None
    assert checked >= 10


def _no_zero(shape, strides, target):
    pad = len(target) - len(shape)
    return (0,) * pad + tuple(strides)


WRONG = {"test_ch02b_1_contiguous_strides": {"fortran-order": {
             "contiguous_strides": lambda shape: tuple(int(np.prod(shape[:i])) for i in range(len(shape)))}},
         "test_ch02b_2_tensor_nbytes": {"ignores-blocks": {
             "tensor_nbytes": lambda shape, t: math.prod(shape) * BLOCKS[t][1]}},
         "test_ch02b_3_broadcast_strides": {"keeps-size-1-strides": {"broadcast_strides": _no_zero}},
         "test_ch02b_4_view_strides": {"always-contiguous": {
             "view_strides": lambda shape, strides, new: tuple(
                 int(np.prod(new[i + 1:])) for i in range(len(new)))}}}
