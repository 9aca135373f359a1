"""Model creators by architecture, found through chapter 03b's table (hand-written, not from a notebook).

`creator(arch)` is the class that builds the graphs of architecture `arch`: the one its row of
`tffedu.config.ARCHS` names (`creator="qwen3.Qwen3Creator"`: module `tffedu.models.qwen3`, class
`Qwen3Creator`), the module imported on first use. `create(cfg, n_ctx, weight_dtypes)` makes one
for a ModelConfig. A new architecture is a row of ARCHS and, only where its graph differs, a module
here (CONTRIBUTING.md, "Adding an architecture"). Nothing below this package imports it."""
from __future__ import annotations

import importlib

from ..config import ARCHS
from ..errors import ModelError

__all__ = ["creator", "create"]


def creator(arch: str) -> type:
    "The creator class of architecture `arch` (a key of tffedu.config.ARCHS); its module is imported on first use."
    row = ARCHS.get(arch) if isinstance(arch, str) else None
    if row is None:
        raise ModelError(f"architecture {arch!r} has no model creator (tffedu runs {', '.join(ARCHS)})")
    module, cls = row.creator.rsplit(".", 1)
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def create(cfg, n_ctx: int, weight_dtypes: dict | None = None):
    "A creator for ModelConfig `cfg`: `creator(cfg.arch)(cfg, n_ctx, weight_dtypes)` (GGUF name -> DType)."
    return creator(cfg.arch)(cfg, n_ctx, weight_dtypes)
