"""Every error tffedu raises on purpose derives from `TffeduError`.

Not a chapter of its own: each chapter raises the class that names its layer, so a user can
catch one base class, or a narrow one, and the message always says what was wrong.
"""

__all__ = ["TffeduError", "RegistryError", "DeviceError", "AllocationError", "ShapeError",
           "GGUFError", "SafetensorsError", "ConfigError", "ModelError", "TokenizerError",
           "NoTokenizerError", "ModelCacheError", "GraphError", "PlannerError", "KVCacheError",
           "SamplingError", "ContextOverflowError", "EngineError", "RequestError",
           "SpeculativeError"]


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
    """A malformed or unsupported model file; the message names the key or byte offset.

    The public API promises this class for every malformed model file, whatever its format, so the
    classes named for other formats and layers of a model file below derive from it."""


class SafetensorsError(GGUFError):
    "A malformed safetensors file or Hugging Face folder (header, shard index, file layout)."


class ModelError(TffeduError, ValueError):
    "A model config or weight set that tffedu cannot run (unknown arch, missing tensor, ...)."


class ConfigError(GGUFError, ModelError):
    """A model file whose config is wrong: a metadata key or config.json field of the wrong type or
    out of range, or tensors whose shapes contradict it. Both a GGUFError (a malformed model file)
    and a ModelError (a config tffedu cannot run)."""


class TokenizerError(TffeduError, ValueError):
    "A vocabulary, pre-tokenizer or chat template that tffedu cannot use."


class NoTokenizerError(TokenizerError):
    "The model file has no tokenizer at all (a weights-only file): not an error in the file."


class ModelCacheError(TffeduError, RuntimeError):
    "The default-model cache cannot be filled or repaired; the message names the file to delete."


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


class EngineError(TffeduError, ValueError):
    "Engine options that cannot work (batch size, token budget, page size, number of pages)."


class SpeculativeError(TffeduError, ValueError):
    "A `speculative=` setting that cannot work: an unknown method, a draft model of another vocabulary."


class RequestError(TffeduError, ValueError):
    """An HTTP request `tffedu serve` cannot take: `status` (4xx or 503), the body field it is about
    (`param`) and an OpenAI error `code`; the message is what the client reads."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code
