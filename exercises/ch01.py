"""Chapter 01 (factories and registries): your answers.

Write each function, then check it: python -m tffedu.exercises ch01
(the reference answers are in solutions/ch01.py: look once you have tried)
"""
import threading
from tffedu.errors import RegistryError
__all__ = ['get_with_fallback', 'once']


def get_with_fallback(registry, op, backends):
    """Exercise 01.1 (easy): the implementation of `op` on the first of `backends` (in order) that
    has it, e.g. ("cuda", "cpu"); a RegistryError naming the op and the backends tried if none has.
    `registry` is an OpRegistry (use its `has` and `get`)."""
    raise NotImplementedError("ch01: get_with_fallback is yours to write")


def once(fn):
    """Exercise 01.2 (medium): a thread-safe lazy value, the core of a SINGLETON. Return a function
    `get()` that calls `fn()` the first time and returns that same object ever after — also when 32
    threads call `get()` at the same moment (fn must run exactly once)."""
    raise NotImplementedError("ch01: once is yours to write")
