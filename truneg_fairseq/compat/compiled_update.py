"""The whole training update as one compiled graph (``--electra-compile-scope update``,
``--batch-mlm-compile-scope update``).

The update that never waits for the device (:mod:`.fast_update`) still launches every kernel of
the forward, the backward, the gradient scaling and clipping and the optimizer from the host. Here
one function does all of it, for one batch:

    the criterion's forward (under bf16 autocast where the task asks for it) and ``backward``;
    the gradients divided by ``where(sample_size == 0, 1, sample_size)``;
    their norm, clipped to ``--clip-norm``;
    AdamW (``--optimizer fused_adamw``'s rule and state), skipped on the device when the norm is
    not finite, the learning rate a device tensor filled at each update (no recompilation as
    the schedule moves);

and ``torch.compile(fullgraph=True)`` makes it one graph, forward and backward included (dynamo's
``trace_autograd_ops``). On a CUDA device it is compiled with ``mode="reduce-overhead"``, so the
graph runs as CUDA graphs: per update the host prepares the batch, fills the learning rate and
replays. The optimizer state and the learning rate are marked static addresses so that the
replay updates them in place. What the graph returns (the statistics, the gradient norm) goes to
the device statistics of :mod:`.device_stats` as in the eager update.

The first update of a process runs eager (it makes the optimizer's state); so do an update of
several sub-batches (``--update-freq``) and a dummy batch. Compilation happens at the second
update; its time is logged. The update rule is PyTorch's AdamW written with ``foreach``
operations (the fused kernel has no compilable form with a tensor learning rate): it equals the
fused kernel to rounding (tests/test_compiled_update.py).
"""

from __future__ import annotations

import logging
import time

import torch

logger = logging.getLogger("truneg_fairseq.compiled_update")


class CompiledUpdate:
    """One trainer's update as one compiled graph (module docstring)."""

    # torch.compile's backend; the tests trace with "aot_eager" (the same graph, no code made)
    backend = "inductor"

    def __init__(self, trainer, clip_norm: float, autocast_criterion, step_context):
        optimizer = trainer.optimizer
        group = optimizer._optimizer.param_groups[0]
        self.model = trainer.model
        self.optimizer = optimizer
        self.criterion = autocast_criterion
        self.step_context = step_context
        self.clip_norm = clip_norm
        self.beta1, self.beta2 = (float(b) for b in group["betas"])
        self.eps = float(group["eps"])
        self.weight_decay = float(group["weight_decay"])
        self.params = list(optimizer.params)
        device = self.params[0].device
        self.cuda = device.type == "cuda"
        self.lr = torch.zeros((), dtype=torch.float32, device=device)
        self.state = None  # (exp_avgs, exp_avg_sqs, steps), once the optimizer has made them
        self.compiled = None
        self.compile_seconds = None

    # ---- on the host ---------------------------------------------------------------------------
    def ready(self) -> bool:
        """Whether the optimizer holds AdamW state for every parameter (after its first step)."""
        state = self.optimizer._optimizer.state
        if self.state is not None:
            first = state.get(self.params[0])
            if first is not None and first.get("exp_avg") is self.state[0][0]:
                return True
            self.state = None  # a state loaded since: its new tensors
        if not all(p in state and "exp_avg" in state[p] for p in self.params):
            return False
        entries = [state[p] for p in self.params]
        if any(s["step"].device != p.device for s, p in zip(entries, self.params)):
            return False
        self.state = (
            [s["exp_avg"] for s in entries],
            [s["exp_avg_sq"] for s in entries],
            [s["step"] for s in entries],
        )
        if self.cuda:  # updated in place by the replayed graph
            for tensor in (self.lr, *self.state[0], *self.state[1], *self.state[2]):
                torch._dynamo.mark_static_address(tensor)
        return True

    def run(self, sample, num_updates: int):
        """One update of ``sample``: (logging output, sample size, gradient norm, finite)."""
        if self.compiled is None:
            from .dynamo_fallback import watch_dynamo_fallback

            watch_dynamo_fallback()  # a fallback to eager is said in fairseq's log
            # shapes are fixed (--electra-compile, --batch-mlm-compile keep full batches only); a
            # host number of the batch that changes (its token count) makes one symbolic
            # recompile, not one per value
            self.compiled = torch.compile(
                self._update,
                fullgraph=True,
                dynamic=None,
                backend=self.backend,
                mode="reduce-overhead" if self.cuda and self.backend == "inductor" else None,
            )
        self.lr.fill_(float(self.optimizer._optimizer.param_groups[0]["lr"]))
        self.model.set_num_updates(num_updates)  # as the task's train_step does
        if self.cuda:
            torch.compiler.cudagraph_mark_step_begin()
        start = time.perf_counter() if self.compile_seconds is None else None
        with self.step_context(sample), torch._dynamo.config.patch(trace_autograd_ops=True):
            sample_size, logging_output, grad_norm, finite = self.compiled(sample)
        if start is not None:
            self.compile_seconds = time.perf_counter() - start
            logger.info(
                f"training updates: compiled as one graph (forward, backward, clipping, AdamW"
                f"{'; CUDA graphs' if self.cuda and self.backend == 'inductor' else ''}) in "
                f"{self.compile_seconds:.1f} s at update {num_updates + 1}"
            )
        return logging_output, sample_size, grad_norm, finite

    # ---- the compiled graph ----------------------------------------------------------------------
    def _update(self, sample):
        loss, sample_size, logging_output = self.criterion(self.model, sample)
        loss.backward()
        # the parameters the loss reached (the rest keep their weights and moments, as in
        # torch's AdamW); decided while tracing, a guard of the graph
        used = [i for i, p in enumerate(self.params) if p.grad is not None]
        params = [self.params[i] for i in used]
        if torch.is_tensor(sample_size):
            total = sample_size.float()
        else:
            total = torch.tensor(float(sample_size), device=self.lr.device)
        divisor = torch.where(total == 0, torch.ones_like(total), total)
        grads = [p.grad for p in params]
        torch._foreach_div_(grads, divisor)
        norms = torch._foreach_norm(grads, 2)
        grad_norm = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]), 2)
        if self.clip_norm > 0:
            coef = (self.clip_norm / (grad_norm + 1e-6)).clamp(max=1)
            torch._foreach_mul_(grads, coef)
        finite = torch.isfinite(grad_norm)
        with torch.no_grad():
            self._adamw(used, grads, finite)
        for p in params:
            p.grad = None
        logging_output = {
            k: v.detach() if torch.is_tensor(v) else v for k, v in logging_output.items()
        }
        return total, logging_output, grad_norm, finite

    def _adamw(self, used, grads, finite) -> None:
        """PyTorch's AdamW (decoupled weight decay, bias-corrected moments, epsilon added to the
        corrected sqrt(v)) on the parameters numbered ``used`` (``grads`` theirs), left unchanged
        where ``finite`` is false."""
        params = [self.params[i] for i in used]
        exp_avgs, exp_avg_sqs, steps = ([part[i] for i in used] for part in self.state)
        beta1, beta2, lr = self.beta1, self.beta2, self.lr
        keep = finite.to(torch.float32)
        grads = [torch.where(finite, g, torch.zeros_like(g)) for g in grads]
        torch._foreach_add_(steps, keep)
        step = steps[0]
        correction1 = 1 - beta1**step
        correction2 = 1 - beta2**step
        step_size = keep * lr / torch.where(correction1 == 0, torch.ones_like(step), correction1)
        correction2_sqrt = torch.where(correction2 == 0, torch.ones_like(step), correction2).sqrt()
        torch._foreach_mul_(params, 1 - keep * lr * self.weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, keep * (1 - beta1))
        torch._foreach_mul_(exp_avg_sqs, 1 - keep * (1 - beta2))
        torch._foreach_add_(
            exp_avg_sqs, torch._foreach_mul(torch._foreach_mul(grads, grads), keep * (1 - beta2))
        )
        denom = torch._foreach_add(
            torch._foreach_div(torch._foreach_sqrt(exp_avg_sqs), correction2_sqrt), self.eps
        )
        torch._foreach_sub_(
            params, torch._foreach_mul(torch._foreach_div(exp_avgs, denom), step_size)
        )


def applies(trainer) -> str | None:
    """Why ``trainer`` (whose update is the fast one) cannot compile its whole update, or None."""
    optimizer = trainer.optimizer
    if len(optimizer._optimizer.param_groups) != 1:
        return "several parameter groups"
    group = optimizer._optimizer.param_groups[0]
    if group.get("amsgrad") or group.get("maximize"):
        return "amsgrad/maximize"
    params = list(optimizer.params)
    if not params or len({(p.device, p.dtype) for p in params}) != 1:
        return "parameters of several devices or dtypes"
    if trainer.data_parallel_world_size != 1:
        return "several workers"
    return None
