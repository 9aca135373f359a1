"""Every error tffedu raises on purpose derives from `TffeduError` (see API.md).

Not a chapter of its own: each chapter raises the class that names its layer, so a user can
catch one base class, or a narrow one, and the message always says what was wrong.
"""

__all__ = ["TffeduError", "RegistryError", "DeviceError", "AllocationError", "ShapeError",
           "GGUFError", "ModelError", "TokenizerError", "GraphError", "PlannerError",
           "KVCacheError", "SamplingError", "ContextOverflowError"]


class TffeduError(Exception):
    "Base class of every error tffedu raises on purpose."


class RegistryError(TffeduError, KeyError):
    "Unknown or duplicate key in a ModuleFactory / OpRegistry."

    def __str__(self):  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


class DeviceError(TffeduError, RuntimeError):
    "A device is missing (no GPU, no PyCUDA) or a tensor is used on the wrong device."


class AllocationError(TffeduError, MemoryError):
    "An allocator or pool cannot satisfy a request (out of memory, bad size, double free)."


class ShapeError(TffeduError, ValueError):
    "Shapes, strides or dtypes that do not fit together."


class GGUFError(TffeduError, ValueError):
    "A malformed or unsupported model file; the message names the key or byte offset."


class ModelError(TffeduError, ValueError):
    "A model config or weight set that tffedu cannot run (unknown arch, missing tensor, ...)."


class TokenizerError(TffeduError, ValueError):
    "A vocabulary, pre-tokenizer or chat template that tffedu cannot use."


class GraphError(TffeduError, ValueError):
    "A malformed computation graph (cycle, unknown op, dangling input)."


class PlannerError(TffeduError, ValueError):
    "The memory planner was given lifetimes or sizes it cannot place."


class KVCacheError(TffeduError, RuntimeError):
    "The KV cache ran out of pages or was used inconsistently; its state is left unchanged."


class SamplingError(TffeduError, ValueError):
    "Invalid sampling or generation parameters."


class ContextOverflowError(TffeduError, ValueError):
    "The prompt plus the new tokens do not fit in the model's context."
