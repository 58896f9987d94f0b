"""A training update that never waits for the device (``fast_updates``).

fairseq 0.12's ``Trainer.train_step`` makes the host wait for the device twice per update even
when nothing is logged: ``numer / (sample_size or 1.0)`` tests a device tensor for truth, and
``torch.isfinite(grad_norm).all()`` is tested on the host before the optimizer step. It also
reads about forty omegaconf values per update (some 2,000 Python calls). On a GPU the host then
cannot queue the next update while the device computes this one.

For a trainer where nothing of that is needed on the host, the update is this module's
:class:`FastUpdate`, which runs the same steps in the same order on the same objects (the task's
``train_step`` per sub-batch, fairseq's gradient all-reduce, multiplication and clipping, the
task's learning-rate bookkeeping outside the update) with two differences:

* the divisor is ``where(sample_size == 0, 1, sample_size)`` on the device (what
  ``sample_size or 1.0`` computes);
* a non-finite gradient norm does not stop the update on the host: the optimizer step is skipped
  on the device (``found_inf`` of PyTorch's fused AdamW kernel: weights, moments and step counts
  are left as they were), the update is counted, and at the next ``--log-interval`` the run stops
  with fairseq's ``FloatingPointError("gradients are Nan/Inf")``, naming the first such update.

With several workers, fairseq's update all-reduces the update's logging outputs and sample size
and reads them on the host, then all-reduces the gradient norms to compare them (three waits an
update). Here the logging outputs and the sample size travel in one vector, all-reduced on the
device (the numbers the host holds, such as ``ntokens``, join it through a pinned buffer), and
the divisor is ``world_size / where(total == 0, 1, total)`` as fairseq's; every worker then adds
the same all-reduced sums to its device statistics, so reading them needs no collective and a
checkpoint saved by rank 0 alone waits for nobody. What that path does not do: compare the
gradient norms of the workers every update (they are equal after the gradient all-reduce of
torch's DDP) and recover from an out-of-memory error on one worker (fairseq's recovery leaves the
others waiting in the gradient all-reduce; here the error stops the run). It keeps fairseq's
update under ``--stop-time-hours`` (which needs the workers' training times averaged on the host
every update) and ``--ddp-backend fully_sharded``.

The config values are read once, when the trainer's first update starts. It applies when: an
optimizer that declares ``skips_on_device = True`` (its ``step`` takes ``found_inf``: the
plugin's ``--optimizer fused_adamw``) and is not wrapped by a loss scaler (no ``--fp16``/``--amp``:
fp32 or the plugin's ``--bf16`` autocast), statistics summed on the device (:mod:`.device_stats`), the
task's own ``optimizer_step`` fairseq's, no EMA, no BMUF/SlowMo, no TPU, no pipeline model
parallelism. The log says once which update a run uses, and why not the fast one.

Within it: under bf16 autocast with an eager model the linear layers run on bf16 copies of
their weights (:mod:`.bf16_weights`; with several workers under torch's DDP the update then sums
the gradients itself, :mod:`.worker_grads`); scope ``update`` (``--electra-compile-scope``,
``--batch-mlm-compile-scope``) runs the whole update as one compiled graph
(:mod:`.compiled_update`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Optional

import torch

from truneg_fairseq.compat import wrap_once

from .device_stats import FINITE_ATTR, SUMMED_ATTR, defers
from .sync_debug import sync_debug_setting, sync_guard
from .worker_grads import all_reduce_statistics

logger = logging.getLogger("truneg_fairseq.fast_update")

_ATTR = "_truneg_fast_update"


def _why_not(trainer) -> Optional[str]:
    """Why ``trainer`` keeps fairseq's update, or None when the fast one applies."""
    from fairseq.tasks import FairseqTask

    cfg = trainer.cfg
    if trainer.data_parallel_world_size != 1:
        if cfg.distributed_training.ddp_backend == "fully_sharded":
            return "--ddp-backend fully_sharded"
        if cfg.optimization.stop_time_hours > 0:
            return "--stop-time-hours with several workers"
    if trainer.tpu or trainer.pipeline_model_parallel:
        return "TPU or pipeline model parallelism"
    if not getattr(type(trainer.optimizer), "skips_on_device", False):
        return "an optimizer other than --optimizer fused_adamw, or a loss scaler (--fp16/--amp)"
    if cfg.common.fp16 or cfg.common.amp:
        return "--fp16/--amp loss scaling"
    if cfg.ema.store_ema:
        return "--store-ema"
    if cfg.distributed_training.ddp_backend == "slowmo" or cfg.optimization.use_bmuf:
        return "BMUF/SlowMo"
    if not defers(trainer):
        return "a criterion whose statistics are not summed on the device"
    if type(trainer.task).optimizer_step is not FairseqTask.optimizer_step:
        return "a task with its own optimizer_step"
    return None


def _compile_scope(task) -> Optional[str]:
    """What ``task``'s compile flag compiles of a training step (``compile_scope()``), or None."""
    scope = getattr(task, "compile_scope", None)
    return scope() if callable(scope) else None


def _update_scope(trainer) -> bool:
    """Whether the task asks for the whole update compiled (its compile scope ``update``)."""
    return _compile_scope(trainer.task) == "update"


def _compile_model_instead(trainer, why: str) -> None:
    """Scope ``update`` where the update cannot be compiled: the model's forward and backward
    are, as with scope ``model`` (the task's ``compile_model``)."""
    flag = trainer.task.compile_scope_flag
    logger.info(f"{flag} update: the model is compiled instead ({why})")
    from .compiled_update import CompiledUpdate

    trainer.task.compile_model(trainer.model, scope="model", backend=CompiledUpdate.backend)


def _autocasts(trainer) -> bool:
    """Whether ``trainer``'s task runs its forward under bf16 autocast on an eager model."""
    from ..precision import AUTOCAST_ATTR

    task = trainer.task
    return bool(getattr(task, AUTOCAST_ATTR, False)) and _compile_scope(task) is None


class FastUpdate:
    """One trainer's update without a host-device synchronisation (module docstring)."""

    # under bf16 autocast with an eager model, the linear layers run on bf16
    # copies of their weights (:mod:`.bf16_weights`: the same numbers, 2 casts a tensor fewer)
    compute_copies = True

    def __init__(self, trainer):
        cfg = trainer.cfg
        self.trainer = trainer
        self.seed = int(cfg.common.seed)
        self.clip_norm = float(cfg.optimization.clip_norm)
        self.empty_cache_freq = int(cfg.common.empty_cache_freq)
        self.crash_path = os.path.join(cfg.checkpoint.save_dir, "crash.pt")
        self.cuda = bool(trainer.cuda)
        self.world = int(trainer.data_parallel_world_size)
        self.group = trainer.data_parallel_process_group if self.world > 1 else None
        self.accumulates = self.world > 1 and hasattr(trainer.model, "no_sync")
        self.sync_debug = sync_debug_setting()
        self.compiled = None
        if _update_scope(trainer):
            from ..precision import autocast_criterion
            from . import compiled_update

            why = compiled_update.applies(trainer)
            if why is None:
                model, task = trainer.model, trainer.task
                # what the task's train_step holds around a step (ELECTRA: padding or not)
                context = getattr(task, "step_context", None)
                self.compiled = compiled_update.CompiledUpdate(
                    trainer,
                    self.clip_norm,
                    autocast_criterion(task, trainer.criterion),
                    (lambda sample: context(model, sample))
                    if context is not None
                    else (lambda sample: contextlib.nullcontext()),
                )
            else:
                _compile_model_instead(trainer, why)
        self.copies = None
        if self.compute_copies and _autocasts(trainer):
            from .bf16_weights import Bf16ComputeWeights

            self.copies = Bf16ComputeWeights(trainer.model) or None
        # torch's DDP all-reduces only gradients accumulated into the weights: with bf16 copies
        # the update sums them itself, after the last backward (:mod:`.worker_grads`)
        self.sums_grads = False
        if self.copies is not None and self.world > 1:
            from .worker_grads import sums_gradients_itself

            self.sums_grads = sums_gradients_itself(trainer.model)
        self.cuda_total_gb = (
            trainer.cuda_env.total_memory_in_GB
            if self.cuda and trainer.cuda_env is not None
            else None
        )

    def __call__(self, samples, raise_oom: bool = False):
        from fairseq import utils
        from fairseq.logging import metrics

        trainer = self.trainer
        num_updates = trainer.get_num_updates()
        # fairseq's per-update seed; without CUDA only the CPU's generator (torch.manual_seed
        # would also queue a seed, with the caller's stack, for a CUDA that never starts)
        if self.cuda:
            utils.set_torch_seed(self.seed + num_updates)
        else:
            torch.default_generator.manual_seed(self.seed + num_updates)
        trainer.model.train()
        trainer.criterion.train()
        trainer.zero_grad()
        metrics.log_start_time("train_wall", priority=800, round=0)

        with sync_guard(self.sync_debug, self.cuda, num_updates):
            done = self._step(samples, num_updates, raise_oom)
        if done is None:
            return None  # an out-of-memory batch skipped
        return self._finish(num_updates, *done)

    def _step(self, samples, num_updates: int, raise_oom: bool):
        """Forward, backward and optimizer step: (logging outputs, sample size, gradient norm,
        whether it is finite), or None for a skipped out-of-memory batch."""
        trainer = self.trainer
        model, optimizer = trainer.model, trainer.optimizer
        compiled = self.compiled
        if compiled is not None:
            done = self._compiled_step(compiled, samples, num_updates)
            if done is not None:
                return done

        copies = self.copies
        if copies is not None:
            copies.begin()
        try:
            logging_outputs, sample_size, is_dummy = self._forward_backward(
                samples, num_updates, raise_oom
            )
        finally:
            if copies is not None:
                copies.end()
        if logging_outputs is None:
            return None
        if compiled is not None:
            compiled.learn_reached()

        if sample_size is None:
            sample_size = 0
        if is_dummy:
            sample_size = sample_size * 0.0
        if self.world > 1:
            device = next(iter(trainer.model.parameters())).device
            logging_outputs, sample_size = all_reduce_statistics(
                logging_outputs, sample_size, is_dummy, device, self.group
            )
        if torch.is_tensor(sample_size):
            sample_size = sample_size.float()
            divisor = torch.where(sample_size == 0, torch.ones_like(sample_size), sample_size)
        else:
            sample_size = float(sample_size)
            divisor = sample_size or 1.0

        if self.sums_grads:
            from .worker_grads import all_reduce_gradients

            all_reduce_gradients(optimizer.params, self.group)
            optimizer.multiply_grads(1.0 / divisor)
        else:
            optimizer.all_reduce_grads(model)
            # torch's DDP averages the workers' gradients: times the world size, they are the sum
            optimizer.multiply_grads(self.world / divisor)
        grad_norm = optimizer.clip_grad_norm(self.clip_norm)
        finite = torch.isfinite(grad_norm)
        optimizer.step(found_inf=(~finite).to(torch.float32))
        return logging_outputs, sample_size, grad_norm, finite

    def _compiled_step(self, compiled, samples, num_updates: int):
        """The update as the compiled graph(s), or None where it runs eager: the first update
        of a process (it makes the optimizer state and shows which parameters the loss
        reaches) and a dummy batch of a single worker. Several workers all take the compiled
        update or all the eager one (their all-reduces must match): a worker's dummy batch too,
        counted as nothing."""
        if not compiled.ready() or (len(samples) > 1 and compiled.reached is None):
            return None  # (decided before the batches are prepared: the eager update does it)
        prepared = [self.trainer._prepare_sample(sample) for sample in samples]
        dummies = [is_dummy for _, is_dummy in prepared]
        if any(dummies) and self.world == 1:
            return None
        try:
            if len(samples) == 1:
                out = compiled.run(prepared[0][0], num_updates, dummies[0])
            else:
                out = compiled.run_many([s for s, _ in prepared], dummies, num_updates)
        except Exception:
            self._save_crash()
            raise
        logging_output, sample_size, grad_norm, finite = out
        # its statistics and gradient norm are already in the interval's sums
        self.trainer.__dict__[SUMMED_ATTR] = compiled.sums
        return [logging_output], sample_size, grad_norm, finite

    def _finish(self, num_updates: int, logging_outputs, sample_size, grad_norm, finite):
        """What follows the optimizer step: the update counted, the statistics added."""
        from fairseq.logging import metrics

        trainer = self.trainer
        trainer.__dict__[FINITE_ATTR] = finite  # for the statistics of this update
        trainer.set_num_updates(num_updates + 1)
        if self.cuda_total_gb is not None:
            gb_used = torch.cuda.max_memory_allocated() / 1024**3
            torch.cuda.reset_peak_memory_stats()
            metrics.log_scalar(
                "gb_free", self.cuda_total_gb - gb_used, priority=1500, round=1, weight=0
            )
        logging_output = trainer._reduce_and_log_stats(logging_outputs, sample_size, grad_norm)
        if (
            self.cuda
            and self.empty_cache_freq > 0
            and (num_updates + self.empty_cache_freq) % self.empty_cache_freq == 0
        ):
            torch.cuda.empty_cache()
        metrics.log_stop_time("train_wall")
        return logging_output

    def _forward_backward(self, samples, num_updates: int, raise_oom: bool):
        """The task's ``train_step`` on every sub-batch: (logging outputs, summed sample size,
        whether the batch was a dummy), or (None, None, False) for a skipped out-of-memory batch."""
        trainer, copies = self.trainer, self.copies
        model, criterion, optimizer = trainer.model, trainer.criterion, trainer.optimizer
        logging_outputs, sample_size, is_dummy = [], None, False
        last = len(samples) - 1
        for i, sample in enumerate(samples):
            sample, is_dummy = trainer._prepare_sample(sample)
            try:
                # several workers: the gradients are all-reduced in the last backward only, or
                # after it by the update itself
                sync = i == last and not self.sums_grads
                with model.no_sync() if self.accumulates and not sync else contextlib.nullcontext():
                    loss, sample_size_i, logging_output = trainer.task.train_step(
                        sample=sample,
                        model=model,
                        criterion=criterion,
                        optimizer=optimizer,
                        update_num=num_updates,
                        ignore_grad=is_dummy,
                    )
                    del loss
                if copies is not None:
                    copies.collect()
            except RuntimeError as e:
                if "out of memory" not in str(e):
                    self._save_crash()
                    raise
                trainer._log_oom(e)
                # several workers: the others would wait in the gradient all-reduce
                if raise_oom or self.world > 1:
                    raise
                logger.warning("attempting to recover from OOM in forward/backward pass")
                trainer.zero_grad()
                if self.cuda:
                    torch.cuda.empty_cache()
                return None, None, False  # one worker: fairseq skips the batch
            except Exception:
                self._save_crash()
                raise
            logging_outputs.append(logging_output)
            sample_size = sample_size_i if sample_size is None else sample_size + sample_size_i
            if self.cuda and num_updates == 0:
                torch.cuda.empty_cache()
        return logging_outputs, sample_size, is_dummy

    def _save_crash(self) -> None:
        """What fairseq's update does before re-raising an unexpected error."""
        trainer = self.trainer
        if self.copies is not None:
            self.copies.end()  # the checkpoint holds the fp32 weights
        with contextlib.suppress(Exception):
            trainer.consolidate_optimizer()
            trainer.save_checkpoint(self.crash_path, {})


def fast_update_of(trainer) -> Optional[FastUpdate]:
    """``trainer``'s :class:`FastUpdate`, decided (and logged) at its first update; None where
    fairseq's update runs."""
    plan = trainer.__dict__.get(_ATTR, False)
    if plan is False:
        why = _why_not(trainer)
        plan = FastUpdate(trainer) if why is None else None
        trainer.__dict__[_ATTR] = plan
        if plan is None:
            logger.info(f"training updates: fairseq's ({why})")
            if _update_scope(trainer):
                _compile_model_instead(trainer, f"fairseq's update: {why}")
        else:
            logger.info(
                "training updates: without host-device synchronisation (statistics read every "
                "--log-interval; a non-finite gradient skips its optimizer step and stops the "
                "run at the next log)"
            )
            slots = getattr(getattr(trainer.criterion, "cfg", None), "mlm_prediction_slots", None)
            if slots == "dynamic":
                logger.info(
                    "training updates: --mlm-prediction-slots dynamic still waits for the device "
                    "in every update (how many positions are masked); --mlm-prediction-slots "
                    "static, the recipes' setting, does not"
                )
            if plan.copies is not None:
                logger.info(
                    f"bf16 autocast: {len(plan.copies)} linear-layer tensors run on bf16 copies "
                    "of their fp32 weights, refreshed every update"
                )
    return plan


def fast_updates() -> None:
    """Run :class:`FastUpdate` as ``Trainer.train_step`` where it applies (idempotent)."""
    from fairseq import trainer as trainer_module
    from fairseq.logging import metrics

    def fast_where_it_applies(fairseq_train_step):
        def train_step(self, samples, raise_oom=False):
            plan = fast_update_of(self)
            if plan is None:
                return fairseq_train_step(self, samples, raise_oom)
            with metrics.aggregate("train"):  # as fairseq's decorator on its train_step
                return plan(samples, raise_oom)

        train_step.__doc__ = fairseq_train_step.__doc__
        return train_step

    wrap_once(trainer_module.Trainer, "train_step", fast_where_it_applies, marker="_truneg_fast")
