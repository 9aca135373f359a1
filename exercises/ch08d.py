"""Chapter 08d (Qwen3-MoE): your answers.

Write each function, then check it: python -m tffedu.exercises ch08d
(the reference answers are in solutions/ch08d.py: look once you have tried)
"""
import numpy as np
__all__ = ['route', 'active_parameters']


def route(logits, k, norm):
    """Exercise 08d.1 (easy): each token's k experts and their weights from the router's logits
    [T, E]: the softmax over the experts, the k largest probabilities (largest first) and their
    indices; with `norm` the k weights are divided by their sum. Returns (indices [T, k], weights [T, k])."""
    raise NotImplementedError("ch08d: route is yours to write")


def active_parameters(n_layer, hidden, n_head, n_head_kv, head_dim, n_expert, n_expert_used, expert_ffn, vocab):
    """Exercise 08d.2 (medium): the parameters one decode token reads in a Qwen3-MoE model (untied):
    per layer the q, k, v, o projections, the q/k norms and two RMSNorms, the router [E, hidden] and
    the gate, up and down of its `n_expert_used` experts; one row of the embedding; the final norm and
    the output head [vocab, hidden]."""
    raise NotImplementedError("ch08d: active_parameters is yours to write")
