"""Chapter 08a exercises: Llama 3's RoPE scaling (reference: HF transformers' rope init) and
llama.cpp's Q/K permutation (reference: HF's rotate-half RoPE against Meta's complex-number RoPE)."""
import numpy as np
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb


def test_ch08a_1_llama3_inv_freq(impl):
    for hd, theta, factor, lo, hi, orig in [(64, 500000.0, 8.0, 1.0, 4.0, 8192), (128, 500000.0, 32.0, 1.0, 4.0, 8192),
                                            (32, 10000.0, 4.0, 2.0, 8.0, 2048)]:
        cfg = LlamaConfig(hidden_size=hd * 2, num_attention_heads=2, head_dim=hd, max_position_embeddings=orig * 16,
                          rope_parameters={"rope_type": "llama3", "rope_theta": theta, "factor": factor,
                                           "low_freq_factor": lo, "high_freq_factor": hi,
                                           "original_max_position_embeddings": orig})
        ref, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
        got = impl.llama3_inv_freq(hd, theta, factor, lo, hi, orig)
        np.testing.assert_allclose(np.asarray(got, np.float64), ref.double().numpy(), rtol=1e-5)


def test_ch08a_2_permute_qk(impl):
    n_head, hd, hidden, T = 3, 16, 24, 5
    g = torch.Generator().manual_seed(0)
    w = torch.randn(n_head * hd, hidden, generator=g, dtype=torch.float64)
    x = torch.randn(T, hidden, generator=g, dtype=torch.float64)
    pos = torch.arange(T, dtype=torch.float64)
    inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.outer(pos, inv)
    # HF: rotate-half RoPE on the original projection
    q = (x @ w.T).reshape(T, n_head, hd).transpose(0, 1)[None]
    emb = torch.cat([ang, ang], -1)
    hf, _ = apply_rotary_pos_emb(q, q, emb.cos()[None], emb.sin()[None])
    hf = hf[0].transpose(0, 1)                                   # [T, H, hd]
    # Meta's original Llama: adjacent pairs as complex numbers, on the permuted projection
    wp = torch.from_numpy(np.asarray(impl.permute_qk(w.numpy(), n_head)))
    qp = (x @ wp.T).reshape(T, n_head, hd // 2, 2)
    meta = torch.view_as_real(torch.view_as_complex(qp.contiguous()) * torch.polar(torch.ones_like(ang), ang)[:, None])
    meta = meta.reshape(T, n_head, hd)
    # the same numbers, in the permuted order
    back = torch.from_numpy(np.asarray(impl.permute_qk(hf.reshape(T, -1).T.numpy(), n_head))).T.reshape(T, n_head, hd)
    torch.testing.assert_close(meta, back)


WRONG = {"test_ch08a_1_llama3_inv_freq": {"no-blend": {"llama3_inv_freq": lambda hd, th, f, lo, hi, orig: np.where(
             2 * np.pi / th ** (-np.arange(0, hd, 2) / hd) > orig / hi,
             th ** (-np.arange(0, hd, 2) / hd) / f, th ** (-np.arange(0, hd, 2) / hd))}},
         "test_ch08a_2_permute_qk": {"whole-matrix": {"permute_qk": lambda w, n: w.reshape(
             2, w.shape[0] // 2, *w.shape[1:]).swapaxes(0, 1).reshape(w.shape)}}}
