"""Chapter 08c exercises: Gemma's RMSNorm (reference: transformers' Gemma3RMSNorm), GELU's tanh form
(reference: torch), and the windowed layers (reference: transformers' Gemma3TextConfig layer types)."""
import numpy as np
import torch
from transformers import Gemma3TextConfig
from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm


def test_ch08c_1_gemma_rmsnorm(impl):
    g = torch.Generator().manual_seed(0)
    for shape, eps in (((3, 64), 1e-6), ((2, 5, 32), 1e-5)):
        x, w = torch.randn(shape, generator=g), 0.3 * torch.randn(shape[-1], generator=g)
        norm = Gemma3RMSNorm(shape[-1], eps=eps)
        with torch.no_grad():
            norm.weight.copy_(w)
            ref = norm(x).double().numpy()
        np.testing.assert_allclose(np.asarray(impl.gemma_rmsnorm(x.numpy(), w.numpy(), eps), np.float64), ref,
                                   rtol=1e-5, atol=1e-6)


def test_ch08c_2_gelu_tanh(impl):
    x = torch.linspace(-8, 8, 1001, dtype=torch.float64)
    ref = torch.nn.functional.gelu(x, approximate="tanh").numpy()
    np.testing.assert_allclose(np.asarray(impl.gelu_tanh(x.numpy()), np.float64), ref, rtol=1e-9, atol=1e-12)


def test_ch08c_3_windowed_layers(impl):
    for n_layer in (1, 6, 7, 26, 34, 62):
        types = Gemma3TextConfig(num_hidden_layers=n_layer).layer_types      # transformers' own default
        assert list(impl.windowed_layers(n_layer, 6)) == [t == "sliding_attention" for t in types]
    assert list(impl.windowed_layers(5, 2)) == [True, False, True, False, True]
    assert list(impl.windowed_layers(4, 0)) == [True] * 4
    assert list(impl.windowed_layers(3, 1)) == [False] * 3


WRONG = {"test_ch08c_1_gemma_rmsnorm": {"times-w": {"gemma_rmsnorm": lambda x, w, eps: np.asarray(x) / np.sqrt(
             (np.asarray(x) ** 2).mean(-1, keepdims=True) + eps) * np.asarray(w)}},
         "test_ch08c_2_gelu_tanh": {"erf-form": {"gelu_tanh": lambda x: torch.nn.functional.gelu(
             torch.as_tensor(x)).numpy()}},
         "test_ch08c_3_windowed_layers": {"first-layer-full": {"windowed_layers": lambda n, p: [
             p == 0 or i % p != 0 for i in range(n)]}}}
