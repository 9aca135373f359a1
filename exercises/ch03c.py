"""Chapter 03c (safetensors): your answers.

Write each function, then check it: python -m tffedu.exercises ch03c
(the reference answers are in solutions/ch03c.py: look once you have tried)
"""
import json
import struct
import numpy as np
__all__ = ['read_header', 'load_tensor']


def read_header(path):
    """Exercise 03c.1 (easy): the JSON header of a .safetensors file (uint64 little-endian length,
    then that many bytes of JSON) as a dict, without the "__metadata__" entry."""
    raise NotImplementedError("ch03c: read_header is yours to write")


def load_tensor(path, name):
    """Exercise 03c.2 (medium): one tensor of a .safetensors file as float32 numpy, of its shape.
    Its data_offsets count from the end of the header; dtypes F32, F16 and BF16 (the upper 16 bits
    of a float32)."""
    raise NotImplementedError("ch03c: load_tensor is yours to write")
