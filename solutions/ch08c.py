"""Chapter 08c (Gemma 3): reference solutions."""
import numpy as np

__all__ = ["gemma_rmsnorm", "gelu_tanh", "windowed_layers"]


def gemma_rmsnorm(x, w, eps):
    """Exercise 08c.1 (easy): Gemma's RMSNorm over the last axis of x, which multiplies by 1 + w where
    Llama's multiplies by w: x / sqrt(mean(x^2) + eps) * (1 + w)."""
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 + np.asarray(w, np.float64))


def gelu_tanh(x):
    """Exercise 08c.2 (easy): GELU in its tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
    elementwise."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def windowed_layers(n_layer, pattern):
    """Exercise 08c.3 (medium): which of n_layer layers have the sliding window, as a list of bools,
    from llama.cpp's pattern period n: layer i is windowed unless i % n == n - 1 (every n-th layer
    sees the whole context); n = 0: every layer is windowed."""
    return [pattern == 0 or i % pattern != pattern - 1 for i in range(n_layer)]
