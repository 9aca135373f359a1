"""Chapter 05b (a Qwen3 block with the builder): reference solutions."""
__all__ = ["projection_flops", "block_matmul_flops"]


def projection_flops(cfg, T):
    """Exercise 05b.1 (easy): FLOPs of the seven weight matrices of one Qwen3 block on T tokens
    (q, k, v, o; gate, up, down): 2·M·N·K per product, cfg a ModelConfig-like object (hidden_size,
    n_head, n_head_kv, head_dim, ffn_size)."""
    h, hd = cfg.hidden_size, cfg.head_dim
    attn = 2 * T * h * (cfg.n_head * hd) * 2 + 2 * T * h * (cfg.n_head_kv * hd) * 2
    return attn + 3 * 2 * T * h * cfg.ffn_size


def block_matmul_flops(cfg, T, past=0):
    """Exercise 05b.2 (medium): all matrix-product FLOPs of the block for T new tokens when `past`
    tokens are already cached: the projections, plus scores q·k and the weighted sum p·v of every
    query head over all S = past + T keys (an eager attention computes the masked ones too)."""
    S = past + T
    return projection_flops(cfg, T) + 2 * 2 * T * S * cfg.head_dim * cfg.n_head
