"""Chapter 05b (a Qwen3 block with the builder): your answers.

Write each function, then check it: python -m tffedu.exercises ch05b
(the reference answers are in solutions/ch05b.py: look once you have tried)
"""
__all__ = ['projection_flops', 'block_matmul_flops']


def projection_flops(cfg, T):
    """Exercise 05b.1 (easy): FLOPs of the seven weight matrices of one Qwen3 block on T tokens
    (q, k, v, o; gate, up, down): 2·M·N·K per product, cfg a ModelConfig-like object (hidden_size,
    n_head, n_head_kv, head_dim, ffn_size)."""
    raise NotImplementedError("ch05b: projection_flops is yours to write")


def block_matmul_flops(cfg, T, past=0):
    """Exercise 05b.2 (medium): all matrix-product FLOPs of the block for T new tokens when `past`
    tokens are already cached: the projections, plus scores q·k and the weighted sum p·v of every
    query head over all S = past + T keys (an eager attention computes the masked ones too)."""
    raise NotImplementedError("ch05b: block_matmul_flops is yours to write")
