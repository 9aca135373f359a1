"""Chapter 02 exercises: aligning with bit operations (reference: integer arithmetic) and tensor
sizes (reference: gguf-py's GGML_QUANT_SIZES, llama.cpp's own table)."""
import math

import gguf
import pytest

from solutions.ch02 import BLOCKS


def test_ch02_1_align_up_pow2(impl):
    for align in (1, 2, 8, 64, 256, 4096):
        for n in list(range(0, 300)) + [4095, 4096, 4097, 10**9 + 7]:
            assert impl.align_up_pow2(n, align) == math.ceil(n / align) * align, (n, align)
    for bad in (0, 3, 48, -8):
        with pytest.raises(ValueError):
            impl.align_up_pow2(10, bad)


def test_ch02_2_tensor_nbytes(impl):
    for name in ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K"]:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]]
        for shape in [(4096, 4096), (151936, 1024), (3, 512), (2, 8, 256)]:
            assert impl.tensor_nbytes(shape, name) == math.prod(shape) // block * size, (name, shape)
        if block > 1:
            with pytest.raises(ValueError):
                impl.tensor_nbytes((4, block + 1), name)


WRONG = {"test_ch02_1_align_up_pow2": {"always-adds": {"align_up_pow2": lambda n, a: n + a - n % a}},
         "test_ch02_2_tensor_nbytes": {"ignores-blocks": {
             "tensor_nbytes": lambda shape, t: math.prod(shape) * BLOCKS[t][1]}}}
