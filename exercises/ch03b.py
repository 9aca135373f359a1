"""Chapter 03b (ModelConfig): your answers.

Write each function, then check it: python -m tffedu.exercises ch03b
(the reference answers are in solutions/ch03b.py: look once you have tried)
"""
__all__ = ['kv_cache_bytes', 'qwen3_param_count']


def kv_cache_bytes(cfg, n_tokens, bytes_per_value=2):
    """Exercise 03b.1 (easy): bytes of the K and V cache of `n_tokens` tokens for a model with this
    ModelConfig-like `cfg` (n_layer, n_head_kv, head_dim): every layer keeps one K and one V vector
    of head_dim values per KV head per token."""
    raise NotImplementedError("ch03b: kv_cache_bytes is yours to write")


def qwen3_param_count(cfg):
    """Exercise 03b.2 (medium): the number of parameters of a Qwen3 model from its config: the
    embedding (vocab x hidden), per layer q/k/v/o projections (no biases), q_norm and k_norm
    (head_dim each), the two RMSNorm weights, the SwiGLU MLP (gate, up, down); the final norm, and
    an output head unless the embeddings are tied."""
    raise NotImplementedError("ch03b: qwen3_param_count is yours to write")
