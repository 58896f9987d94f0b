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
import operator
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
    # ``step(found_inf=...)`` skips a non-finite update on the device (training/fast_update.py)
    skips_on_device = True

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

    # fairseq's FairseqOptimizer walks the parameter groups at every use of ``params`` (several
    # times an update) and multiplies and clears the gradients one parameter at a time in Python
    @property
    def params(self):
        """The parameters, listed once (loading a state keeps the same parameter objects)."""
        cached = self.__dict__.get("_param_list")
        if cached is None:
            cached = [p for group in self.param_groups for p in group["params"]]
            self.__dict__["_param_list"] = cached
        return cached

    def multiply_grads(self, c):
        """Every gradient times ``c`` (a number or a one-element tensor) in one foreach call."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if not grads:
            return
        if torch.is_tensor(c):
            c = c.to(grads[0].device)
        torch._foreach_mul_(grads, c)

    def zero_grad(self):
        self._optimizer.zero_grad(set_to_none=True)

    def step(self, closure=None, scale=1.0, groups=None, found_inf=None):
        """One AdamW update: PyTorch's own fused kernel (``torch._fused_adamw_``, CPU and CUDA)
        called directly on the parameter, gradient and state lists, which
        ``torch.optim.AdamW.step`` would gather again in a Python loop over every parameter at
        each update. The state stays torch's (``exp_avg``, ``exp_avg_sq``, ``step`` per
        parameter), so checkpoints load in either. Anything the direct call does not cover (a
        closure, a scale, several parameter groups, sparse gradients, several devices or
        dtypes) takes ``torch.optim.AdamW.step``.

        ``found_inf``: a one-element float tensor on the parameters' device; where it is 1 the
        update is skipped on the device (parameters, moments and step counts unchanged), with
        no host-device synchronisation on the direct path."""
        lists = None if closure is not None or scale != 1.0 else self._step_lists()
        if lists is None:
            if found_inf is not None and bool(found_inf):  # the general path decides on the host
                return None
            return super().step(closure, scale=scale, groups=groups)
        params, grads, exp_avgs, exp_avg_sqs, steps = lists
        group = self._optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        if found_inf is None:
            torch._foreach_add_(steps, 1)
        else:
            found_inf = found_inf.to(device=steps[0].device, dtype=torch.float32)
            # a skipped update does not count (a list of one tensor: a kernel, not a host read)
            torch._foreach_add_(steps, [1.0 - found_inf] * len(steps))
        torch._fused_adamw_(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            amsgrad=False,
            maximize=False,
            grad_scale=None,
            found_inf=found_inf,
        )

    def _step_lists(self):
        """(params, grads, exp_avgs, exp_avg_sqs, steps) of the parameters with a gradient, the
        state made as torch's AdamW makes it and listed again only when the parameters with a
        gradient change; None where the direct call does not apply."""
        opt = self._optimizer
        if len(opt.param_groups) != 1:
            return None
        group = opt.param_groups[0]
        if group.get("amsgrad") or group.get("maximize") or group.get("capturable"):
            return None
        params = [p for p in self.params if p.grad is not None]
        if not params:
            return None
        cached = self.__dict__.get("_step_cache")
        if not (
            cached is not None
            and len(cached[0]) == len(params)
            and all(map(operator.is_, cached[0], params))
        ):
            cached = self._gather(params)
            if cached is None:
                return None
            self.__dict__["_step_cache"] = cached
        params, exp_avgs, exp_avg_sqs, steps, kind = cached
        grads = [p.grad for p in params]
        if grads[0].is_sparse or (grads[0].device, grads[0].dtype) != kind:
            return None
        return params, grads, exp_avgs, exp_avg_sqs, steps

    def load_state_dict(self, state_dict, optimizer_overrides=None):
        self.__dict__.pop("_step_cache", None)  # the state tensors are new objects
        return super().load_state_dict(state_dict, optimizer_overrides)

    def _gather(self, params):
        """The state lists of ``params`` (made as torch's AdamW makes them) and their one
        (device, dtype); None for parameters of several devices or dtypes."""
        opt = self._optimizer
        first = params[0]
        kinds = {(p.device, p.dtype, p.grad.device, p.grad.dtype) for p in params}
        if len(kinds) != 1 or not first.dtype.is_floating_point:
            return None
        state = opt.state
        if len(state) < len(params) or any(p not in state for p in params):
            for p in params:
                if p not in state or "exp_avg" not in state[p]:
                    state[p] = {
                        "step": torch.zeros((), dtype=torch.float32, device=p.device),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                    }
        states = [state[p] for p in params]
        steps = [st["step"] for st in states]
        if steps[0].device != first.device:  # a state loaded from elsewhere: the kernel's device
            for st in states:
                st["step"] = st["step"].to(device=first.device, dtype=torch.float32)
            steps = [st["step"] for st in states]
        return (
            params,
            [st["exp_avg"] for st in states],
            [st["exp_avg_sq"] for st in states],
            steps,
            (first.device, first.dtype),
        )

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
