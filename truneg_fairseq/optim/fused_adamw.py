"""``--optimizer fused_adamw``: PyTorch's AdamW with its fused CUDA kernel (one launch for every
parameter; ``foreach`` kernels on CPU), and gradient-norm clipping in a handful of ``foreach``
kernels.

fairseq's ``adam`` without NVIDIA's apex updates and measures gradients one parameter at a time:
on a GPU that is hundreds of small kernel launches per step, which dominates a step of a small
model such as ELECTRA-small. The update rule is fairseq's ``adam`` (Adam with decoupled weight
decay) except for where epsilon enters: PyTorch adds it to the bias-corrected sqrt(v), fairseq
before the correction, which differs only while sqrt(v) is of the order of epsilon.
"""

import ast
from dataclasses import dataclass, field
from typing import List

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from omegaconf import II, ListConfig


@dataclass
class FusedAdamWConfig(FairseqDataclass):
    fused_adamw_betas: str = field(
        default="(0.9, 0.999)", metadata={"help": "Adam's (beta1, beta2)"}
    )
    fused_adamw_eps: float = field(
        default=1e-8, metadata={"help": "Adam's epsilon (ELECTRA: 1e-6)"}
    )
    fused_adamw_weight_decay: float = field(
        default=0.0, metadata={"help": "decoupled weight decay"}
    )
    lr: List[float] = II("optimization.lr")


@register_optimizer("fused_adamw", dataclass=FusedAdamWConfig)
class FusedAdamW(FairseqOptimizer):
    def __init__(self, cfg: FusedAdamWConfig, params):
        super().__init__(cfg)
        params = list(params)
        tensors = [
            p for group in params for p in (group["params"] if isinstance(group, dict) else [group])
        ]
        # the fused kernel needs every parameter on one CUDA device in a floating dtype
        fused = bool(tensors) and all(p.is_cuda for p in tensors)
        self._optimizer = torch.optim.AdamW(
            params, **self.optimizer_config, fused=fused, foreach=not fused
        )

    @property
    def optimizer_config(self):
        betas = self.cfg.fused_adamw_betas
        betas = tuple(ast.literal_eval(betas) if isinstance(betas, str) else betas)
        return {
            "lr": self.cfg.lr[0]
            if isinstance(self.cfg.lr, (list, tuple, ListConfig))
            else self.cfg.lr,
            "betas": betas,
            "eps": self.cfg.fused_adamw_eps,
            "weight_decay": self.cfg.fused_adamw_weight_decay,
        }

    @property
    def supports_flat_params(self):
        return True

    def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
        """Total L2 norm of the gradients (fp32), clipped to ``max_norm`` when it is > 0: the
        result of fairseq's ``utils.clip_grad_norm_`` in a few ``foreach`` kernels and without
        a device-to-host sync."""
        grads = [p.grad.detach() for p in self.params if p.grad is not None]
        if not grads:
            return torch.tensor(0.0)
        norms = torch._foreach_norm(grads, 2)  # one norm per tensor, fp32 accumulation
        total = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]), 2)
        if aggregate_norm_fn is not None:
            total = aggregate_norm_fn(total)
        if max_norm > 0:
            coef = (max_norm / (total + 1e-6)).clamp_(max=1)
            torch._foreach_mul_(grads, coef)
        return total
