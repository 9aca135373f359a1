"""Chapter 01 (factories and registries): reference solutions."""
import threading

from tffedu.errors import RegistryError

__all__ = ["get_with_fallback", "once"]


def get_with_fallback(registry, op, backends):
    """Exercise 01.1 (easy): the implementation of `op` on the first of `backends` (in order) that
    has it, e.g. ("cuda", "cpu"); a RegistryError naming the op and the backends tried if none has.
    `registry` is an OpRegistry (use its `has` and `get`)."""
    for b in backends:
        if registry.has(op, b):
            return registry.get(op, b)
    raise RegistryError(f"op {op!r} is on none of {list(backends)}")


def once(fn):
    """Exercise 01.2 (medium): a thread-safe lazy value, the core of a SINGLETON. Return a function
    `get()` that calls `fn()` the first time and returns that same object ever after — also when 32
    threads call `get()` at the same moment (fn must run exactly once)."""
    lock, box = threading.Lock(), []

    def get():
        if not box:
            with lock:
                if not box:
                    box.append(fn())
        return box[0]
    return get
