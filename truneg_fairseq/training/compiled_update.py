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
replay updates them in place. The graph also adds the update's statistics and gradient norm to
the interval's sums (:class:`.device_stats.GraphSums`, static too), which the log reads and clears
every ``--log-interval``: nothing is launched for them outside the graph.

With several workers the graph runs the model without its DDP wrapper and sums what the
wrapper and the eager update would, with functional all-reduces inside the graph: the logging
output and sample size as one float64 vector, the gradients as one flat fp32 vector (not
divided by the number of workers; the update divides by the summed sample size). Every worker
takes the graph at the same updates (a worker's dummy batch too, its loss and statistics
multiplied by 0), so the collectives match.

An update of several batches (``--update-freq``) runs as two graphs: one batch's forward and
backward, replayed once a batch, adding into gradient buffers made once (static addresses, so
that each replay writes where the last one did), then the division, clipping and AdamW, which
also clears the buffers. The parameters that get buffers are those an eager update's backward
reached. A batch's statistics come back as one vector, added up on the device as they arrive
(with several workers, summed over them by one all-reduce) and handed to the second graph, which
adds them to the interval's sums.

An update runs eager until the optimizer has its state (the first update of a run; a resumed
run loads it), and an update of several batches also until one eager update of the process has
shown which parameters the loss reaches; so does, with one worker, a dummy batch. Where
inductor does not record the graph as CUDA graphs, the log says so. The compile time of the
first compiled update is logged. The update rule is PyTorch's AdamW written with ``foreach``
operations (the fused kernel has no compilable form with a tensor learning rate): it equals the
fused kernel to rounding (tests/test_compiled_update.py).
"""

from __future__ import annotations

import logging
import time
from typing import Optional

import torch

from .device_stats import GraphSums

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
        # 1, or 0 for a dummy batch (several workers: one whose share of the epoch has run out
        # takes the same graph, its loss and statistics counted as nothing, as fairseq's update)
        self.keep = torch.ones((), dtype=torch.float32, device=device)
        self.keeps = True  # what ``keep`` holds (set on the device only when it changes)
        # the statistics of the compiled updates since the last log, added by the graph
        self.sums = GraphSums(device, clip_norm)
        self.world = int(trainer.data_parallel_world_size)
        self.group = trainer.data_parallel_process_group if self.world > 1 else None
        if self.world > 1:  # the gradients are summed in the graph, not by the DDP wrapper
            self.model = _unwrapped(self.model)
        self.state = None  # (exp_avgs, exp_avg_sqs, steps), once the optimizer has made them
        self.compiled = None
        self.compile_seconds = None
        # several batches an update: the two graphs, the parameters the loss reaches (learnt
        # from an eager update) and their gradient buffers
        self.micro = self.apply = None
        self.reached = self.grads = None

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
        # updated in place by the graph: on a GPU a replayed CUDA graph writes them where they
        # are (inductor records no CUDA graph that mutates an input of another kind); marked on
        # any device, so that the graph traced is the one a GPU runs
        for tensor in (self.lr, self.keep, *self.state[0], *self.state[1], *self.state[2]):
            torch._dynamo.mark_static_address(tensor)
        return True

    def learn_reached(self) -> None:
        """After an eager update's backward: which parameters the loss reaches (those with a
        gradient), for the gradient buffers of updates of several batches."""
        if self.reached is None:
            self.reached = [i for i, p in enumerate(self.params) if p.grad is not None]

    def _compile(self, fn):
        from .dynamo_fallback import watch_dynamo_fallback

        watch_dynamo_fallback()  # a fallback to eager is said in fairseq's log
        # shapes are fixed (--electra-compile, --batch-mlm-compile keep full batches only); a
        # host number of the batch that changes (its token count) makes one symbolic recompile,
        # not one per value
        return torch.compile(
            fn,
            fullgraph=True,
            dynamic=None,
            backend=self.backend,
            mode="reduce-overhead" if self.cuda and self.backend == "inductor" else None,
        )

    def _begin(self, num_updates: int) -> Optional[tuple]:
        self.lr.fill_(float(self.optimizer._optimizer.param_groups[0]["lr"]))
        self.model.set_num_updates(num_updates)  # as the task's train_step does
        self.sums.begin(num_updates)
        return (time.perf_counter(), _cudagraph_skips()) if self.compile_seconds is None else None

    def _keep(self, keeps: bool) -> None:
        if keeps != self.keeps:
            self.keep.fill_(1.0 if keeps else 0.0)
            self.keeps = keeps

    def _replay(self, fn, sample, *args):
        if self.cuda:
            torch.compiler.cudagraph_mark_step_begin()
        with self.step_context(sample), torch._dynamo.config.patch(trace_autograd_ops=True):
            return fn(sample, *args)

    def _said(self, started, num_updates: int, what: str) -> None:
        """The compile time in the log (after the first compiled update)."""
        if started is None:
            return
        start, skips = started
        self.compile_seconds = time.perf_counter() - start
        graphs = self.cuda and self.backend == "inductor"
        workers = f"; gradients summed over {self.world} workers" if self.world > 1 else ""
        logger.info(
            f"training updates: compiled as {what}{workers}{'; CUDA graphs' if graphs else ''}) "
            f"in {self.compile_seconds:.1f} s at update {num_updates + 1}"
        )
        if graphs and _cudagraph_skips() > skips:
            logger.warning(
                "training updates: inductor did not record the compiled update as CUDA graphs "
                "(it runs its kernels one launch each); TORCH_LOGS=cudagraphs says why"
            )

    def run(self, sample, num_updates: int, is_dummy: bool = False):
        """One update of ``sample``: (logging output, sample size, gradient norm, finite)."""
        if self.compiled is None:
            self.compiled = self._compile(self._update)
        started = self._begin(num_updates)
        self._keep(not is_dummy)
        sample_size, logging_output, grad_norm, finite, keys = self._replay(
            self.compiled, sample, self.keep
        )
        self.sums.took(keys)
        self._said(started, num_updates, "one graph (forward, backward, clipping, AdamW")
        return logging_output, sample_size, grad_norm, finite

    def run_many(self, samples, dummies, num_updates: int):
        """One update of several batches (``samples``, ``dummies`` their dummy flags): (its
        logging output, sample size, gradient norm, finite)."""
        if self.micro is None:
            self.micro, self.apply = self._compile(self._micro), self._compile(self._apply)
        started = self._begin(num_updates)
        if self.grads is None:
            self.grads = [torch.zeros_like(self.params[i]) for i in self.reached]
            for grad in self.grads:  # written in place by every replay
                torch._dynamo.mark_static_address(grad)
        for i, grad in zip(self.reached, self.grads):
            self.params[i].grad = grad
        total, host = None, {}
        for sample, dummy in zip(samples, dummies):
            self._keep(not dummy)
            vector, keys, numbers = self._replay(self.micro, sample, self.keep)
            # added at once: the next replay writes its outputs where these are
            total = vector.clone() if total is None else total.add_(vector)
            if not dummy:
                for key, value in numbers.items():
                    host[key] = host.get(key, 0) + value
        if self.world > 1:  # the host numbers join the vector, summed over the workers
            total, keys, host = self._all_reduce_many(total, keys, host), (*keys, *host), {}
        logging_output = {**dict(zip(keys, total[:-1].unbind())), **host}
        sample_size = total[-1]
        if self.cuda:
            torch.compiler.cudagraph_mark_step_begin()
        grad_norm, finite = self.apply(total)
        self.sums.took(keys)
        self._said(
            started, num_updates, "two graphs (a batch's forward and backward; clipping, AdamW"
        )
        return logging_output, sample_size, grad_norm, finite

    # ---- the compiled graph ----------------------------------------------------------------------
    def _update(self, sample, keep):
        loss, sample_size, logging_output = self.criterion(self.model, sample)
        (loss * keep).backward()
        # the parameters the loss reached (the rest keep their weights and moments, as in
        # torch's AdamW); decided while tracing, a guard of the graph
        used = [i for i, p in enumerate(self.params) if p.grad is not None]
        params = [self.params[i] for i in used]
        grads = [p.grad for p in params]
        if self.world > 1:
            logging_output, total = self._all_reduce(logging_output, sample_size, keep)
        elif torch.is_tensor(sample_size):
            total = sample_size.float()
        else:
            total = torch.tensor(float(sample_size), device=self.lr.device)
        grad_norm, finite = self._step(used, grads, total)
        for p in params:
            p.grad = None
        logging_output = {
            k: v.detach() if torch.is_tensor(v) else v for k, v in logging_output.items()
        }
        keys = tuple(k for k, v in logging_output.items() if torch.is_tensor(v) and v.numel() == 1)
        self.sums.add([logging_output[k] for k in keys], grad_norm, finite)
        return total, logging_output, grad_norm, finite, keys

    def _micro(self, sample, keep):
        """One batch of an update of several: forward and backward (the gradients added into
        the buffers), its statistics as (one float64 vector, the sample size last; the keys of
        the vector's values; the host numbers)."""
        loss, sample_size, logging_output = self.criterion(self.model, sample)
        (loss * keep).backward()
        keys = tuple(k for k, v in logging_output.items() if torch.is_tensor(v))
        host = {k: v for k, v in logging_output.items() if not torch.is_tensor(v)}
        if not torch.is_tensor(sample_size):
            sample_size = torch.tensor(float(sample_size), device=self.lr.device)
        values = [logging_output[k].detach().reshape(()).double() for k in keys]
        vector = torch.stack([*values, sample_size.detach().reshape(()).double()])
        return vector * keep.double(), keys, host

    def _apply(self, total):
        """The update of several batches after their backward (``total``: their statistics, the
        sample size last): division, clipping, AdamW, the statistics added to the interval's;
        the gradient buffers cleared for the next update."""
        grads = [self.params[i].grad for i in self.reached]
        grad_norm, finite = self._step(self.reached, grads, total[-1].float())
        torch._foreach_zero_(grads)
        self.sums.add(total[:-1], grad_norm, finite)
        return grad_norm, finite

    def _step(self, used, grads, total):
        """``grads`` (of the parameters numbered ``used``) summed over the workers, divided by
        ``where(total == 0, 1, total)``, clipped; AdamW. Returns (gradient norm, finite)."""
        if self.world > 1:
            grads = self._sum_gradients(grads)
        divisor = torch.where(total == 0, torch.ones_like(total), total)
        torch._foreach_div_(grads, divisor)
        norms = torch._foreach_norm(grads, 2)
        grad_norm = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]), 2)
        if self.clip_norm > 0:
            coef = (self.clip_norm / (grad_norm + 1e-6)).clamp(max=1)
            torch._foreach_mul_(grads, coef)
        finite = torch.isfinite(grad_norm)
        with torch.no_grad():
            self._adamw(used, grads, finite)
        return grad_norm, finite

    def _all_reduce(self, logging_output, sample_size, keep):
        """The logging output and sample size summed over the workers (one float64 vector, as
        the eager update's), the host numbers of the batch (token counts) joining it."""
        import torch.distributed._functional_collectives as funcol

        keys = list(logging_output)
        device = self.lr.device
        values = [*(logging_output[k] for k in keys), sample_size]
        vector = torch.cat(
            [
                v.detach().reshape(1).to(device=device, dtype=torch.float64)
                if torch.is_tensor(v)
                else torch.tensor([float(v)], dtype=torch.float64, device=device)
                for v in values
            ]
        )
        summed = funcol.all_reduce(vector * keep.double(), "sum", self.group).unbind()
        return dict(zip(keys, summed[:-1])), summed[-1]

    def _all_reduce_many(self, total, keys, host):
        """Several batches' statistics (``total``: the values of ``keys``, the sample size last;
        ``host``: the numbers the host holds) summed over the workers: one float64 vector of
        ``keys``, ``host``'s keys and the sample size (outside the graphs)."""
        from fairseq.distributed import utils as distributed_utils

        numbers = torch.tensor([float(v) for v in host.values()], dtype=torch.float64)
        if self.cuda:  # a copy from pinned memory does not wait for the device
            numbers = numbers.pin_memory()
        numbers = numbers.to(total.device, non_blocking=True)
        vector = torch.cat([total[:-1], numbers, total[-1:]])
        distributed_utils.all_reduce(vector, self.group)
        return vector

    def _sum_gradients(self, grads):
        """``grads`` summed over the workers: one flat all-reduce (all have one dtype)."""
        import torch.distributed._functional_collectives as funcol

        flat = funcol.all_reduce(torch.cat([g.reshape(-1) for g in grads]), "sum", self.group)
        return [v.view_as(g) for v, g in zip(flat.split([g.numel() for g in grads]), grads)]

    def _adamw(self, used, grads, finite) -> None:
        """PyTorch's AdamW (decoupled weight decay, bias-corrected moments, epsilon added to the
        corrected sqrt(v)) on the parameters numbered ``used`` (``grads`` theirs), left unchanged
        where ``finite`` is false."""
        params = [self.params[i] for i in used]
        exp_avgs, exp_avg_sqs, steps = ([part[i] for i in used] for part in self.state)
        beta1, beta2, lr = self.beta1, self.beta2, self.lr
        keep = finite.to(torch.float32)
        grads = [torch.where(finite, g, torch.zeros_like(g)) for g in grads]
        # a list of tensors: with one 0-dim tensor foreach add reads it on the host
        torch._foreach_add_(steps, [keep] * len(steps))
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
    return None


def _unwrapped(model):
    """``model`` without its data-parallel wrappers (fairseq's proxy, torch's or fairseq's DDP)."""
    from fairseq.distributed import LegacyDistributedDataParallel, ModuleProxyWrapper
    from torch.nn.parallel import DistributedDataParallel

    while isinstance(
        model, (ModuleProxyWrapper, DistributedDataParallel, LegacyDistributedDataParallel)
    ):
        model = model.module
    return model


def _cudagraph_skips() -> int:
    """How often inductor has left a compiled graph without CUDA graphs in this process."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["cudagraph_skips"])
