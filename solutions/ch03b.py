"""Chapter 03b (ModelConfig): reference solutions."""
__all__ = ["kv_cache_bytes", "qwen3_param_count"]


def kv_cache_bytes(cfg, n_tokens, bytes_per_value=2):
    """Exercise 03b.1 (easy): bytes of the K and V cache of `n_tokens` tokens for a model with this
    ModelConfig-like `cfg` (n_layer, n_head_kv, head_dim): every layer keeps one K and one V vector
    of head_dim values per KV head per token."""
    return 2 * cfg.n_layer * cfg.n_head_kv * cfg.head_dim * n_tokens * bytes_per_value


def qwen3_param_count(cfg):
    """Exercise 03b.2 (medium): the number of parameters of a Qwen3 model from its config: the
    embedding (vocab x hidden), per layer q/k/v/o projections (no biases), q_norm and k_norm
    (head_dim each), the two RMSNorm weights, the SwiGLU MLP (gate, up, down); the final norm, and
    an output head unless the embeddings are tied."""
    h, hd = cfg.hidden_size, cfg.head_dim
    attn = h * cfg.n_head * hd + 2 * h * cfg.n_head_kv * hd + cfg.n_head * hd * h + 2 * hd
    mlp = 3 * h * cfg.ffn_size
    layer = attn + mlp + 2 * h
    head = 0 if cfg.tied_embeddings else cfg.vocab_size * h
    return cfg.vocab_size * h + cfg.n_layer * layer + h + head
