"""One LayerNorm epsilon for a whole model (BERT and ELECTRA checkpoints use 1e-12, fairseq's
modules are built with 1e-5)."""

import torch.nn as nn


def set_layernorm_eps(model: nn.Module, eps: float) -> int:
    """Set ``eps`` on every LayerNorm of ``model``; returns how many. fairseq's ``LayerNorm`` is
    torch's, or apex's fused one on GPUs that have it: both read ``.eps``."""
    n = 0
    for m in model.modules():
        if "LayerNorm" in type(m).__name__ and hasattr(m, "eps"):
            m.eps = eps
            n += 1
    return n
