"""Chapter 03a (quantized blocks): your answers.

Write each function, then check it: python -m tffedu.exercises ch03a
(the reference answers are in solutions/ch03a.py: look once you have tried)
"""
import numpy as np
__all__ = ['dequantize_q8_0', 'quantize_q8_0', 'dequantize_q4_0', 'dequantize_iq4_nl']


def dequantize_q8_0(raw):
    """Exercise 03a.1 (easy): Q8_0 blocks (34 bytes each: an f16 scale d, then 32 int8 q) to float32
    weights, x = d * q. `raw` is a uint8 array (or bytes) of whole blocks; return a flat array."""
    raise NotImplementedError("ch03a: dequantize_q8_0 is yours to write")


def quantize_q8_0(x):
    """Exercise 03a.2 (medium): float32 weights (a multiple of 32) to Q8_0 bytes, as ggml does it:
    per block d = max|x| / 127, q = round(x / d) (to nearest, halves away from zero; 0 where d = 0),
    d stored as float16. Return a uint8 array of 34 bytes per block."""
    raise NotImplementedError("ch03a: quantize_q8_0 is yours to write")


def dequantize_q4_0(raw):
    """Exercise 03a.3 (medium): Q4_0 blocks (18 bytes: an f16 scale d, then 16 bytes of nibbles) to
    float32: x = d * (nibble - 8). Byte j holds element j in its low nibble and element j + 16 in
    its high nibble."""
    raise NotImplementedError("ch03a: dequantize_q4_0 is yours to write")


IQ4_LEVELS = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]   # ggml's kvalues_iq4nl


def dequantize_iq4_nl(raw):
    """Exercise 03a.4 (medium): IQ4_NL blocks (18 bytes, laid out as Q4_0's) to float32, but a nibble
    q picks a level: x = d * IQ4_LEVELS[q] (Q4_0's levels would be q - 8, evenly spaced)."""
    raise NotImplementedError("ch03a: dequantize_iq4_nl is yours to write")
