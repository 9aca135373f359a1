"""Chapter 08d exercises: the router (reference: transformers' Qwen3MoeTopKRouter) and the parameters
a token reads (reference: a transformers Qwen3MoeForCausalLM, its parameters counted)."""
import numpy as np
import torch
import transformers
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter


def test_ch08d_1_route(impl):
    g = torch.Generator().manual_seed(0)
    for E, k, norm in ((8, 2, True), (16, 4, False), (64, 8, True), (4, 1, False)):
        cfg = transformers.Qwen3MoeConfig(hidden_size=32, num_experts=E, num_experts_per_tok=k, norm_topk_prob=norm)
        router = Qwen3MoeTopKRouter(cfg)
        with torch.no_grad():
            router.weight.copy_(torch.randn(E, 32, generator=g))
            x = torch.randn(7, 32, generator=g)
            logits, weights, idx = router(x)
        got_idx, got_w = impl.route(logits.numpy(), k, norm)
        np.testing.assert_array_equal(np.asarray(got_idx), idx.numpy())
        np.testing.assert_allclose(np.asarray(got_w, np.float64), weights.double().numpy(), rtol=1e-5)


def test_ch08d_2_active_parameters(impl):
    shape = dict(vocab_size=300, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
                 tie_word_embeddings=False)
    m = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(**shape))
    total = sum(p.numel() for p in m.parameters())
    experts = sum(p.numel() for n, p in m.named_parameters() if ".experts." in n)
    read = total - experts * (8 - 2) // 8 - (300 - 1) * 64     # k of E experts, one embedding row
    assert impl.active_parameters(3, 64, 4, 2, 16, 8, 2, 32, 300) == read


WRONG = {"test_ch08d_1_route": {"no-softmax": {"route": lambda lg, k, norm: (
             np.argsort(-np.asarray(lg), axis=-1, kind="stable")[:, :k],
             np.take_along_axis(np.asarray(lg), np.argsort(-np.asarray(lg), axis=-1, kind="stable")[:, :k], -1))}},
         "test_ch08d_2_active_parameters": {"all-experts": {"active_parameters": lambda L, D, H, Hk, hd, E, k, F, V:
             L * (D * H * hd * 2 + D * Hk * hd * 2 + 2 * hd + 2 * D + E * D + E * 3 * D * F) + 2 * D + V * D}}}
