"""``transformers.Trainer`` for the counter-false-negative objectives.

:class:`TrueNegativeTrainer` trains a :class:`~truneg_fairseq.hf.TrueNegativeMLM` (or
:class:`~truneg_fairseq.hf.ElectraPretraining`) with a
:class:`~truneg_fairseq.hf.MaskedLMCollator`:

* the loss of an update is the sum over its micro-batches and processes divided by their masked
  tokens (``Trainer``'s ``num_items_in_batch``), fairseq's normalisation: two processes give the
  update of one process with gradient accumulation 2;
* each step's statistics are added up on the device (no ``.item()`` in the step) and, every
  ``logging_steps``, summed over the processes, read once and reduced by the fairseq criterion's
  own ``reduce_metrics`` (:mod:`truneg_fairseq.hf.stats`): beside ``Trainer``'s ``loss`` (nats per
  masked token, as transformers logs it), ``loss_bits`` (fairseq's ``loss``: bits per masked
  token), ``mlm_loss_bits``, ``corrected_loss_bits``/``sr_loss_bits``/``kl_loss_bits``/
  ``disc_loss_bits``, ``ppl``, ``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``,
  ``iter_corr_ratio``, ``content_pred``, ... go to every ``report_to`` (tensorboard included);
* :meth:`evaluate` reports the same values over the evaluation set as ``eval_<name>``, and
  ``eval_loss`` in nats per masked token (``exp(eval_loss)`` is the perplexity);
  ``compute_metrics`` and ``preprocess_logits_for_metrics`` are refused (the step computes
  logits at the prediction slots only), and so is ``compute_loss_func`` (the objective is the
  loss);
* ``load_best_model_at_end`` loads every model of the best checkpoint; the logging, evaluation
  and save intervals of a resumed run are the run's arguments, not the checkpoint's;
* the epoch is the trainer's: at each epoch's start it sets the collator's epoch (the masks) and
  the order of the examples (:mod:`truneg_fairseq.hf.sharding`: the same in every process,
  drawn from the seed and the epoch) to the integer epoch it is in, in fresh and resumed runs
  alike; with several processes the epoch's last batches are filled with marked rows that
  nothing counts, so that K processes make the updates of one with gradient accumulation K;
* checkpoints hold the HF model(s) as ``save_pretrained`` writes them (ELECTRA: the discriminator,
  and the generator in ``generator/``), so ``checkpoint-N`` loads with ``from_pretrained`` and
  ``resume_from_checkpoint`` continues from it;
* the checkpoints it writes are listed in the output directory's run marker
  (:mod:`truneg_fairseq.hf.output_dir`), each with the run's settings (``run_settings``) when
  given; ``save_total_limit`` deletes only listed checkpoints, never another folder; a save that
  fails for lack of space, and a checkpoint that cannot be loaded safely, are one
  :class:`~truneg_fairseq.errors.OutputDirError` naming the folder.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time

import torch
from transformers import Trainer, TrainerCallback

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.hf import checkpoint_errors
from truneg_fairseq.hf import output_dir as outdir
from truneg_fairseq.hf.objective import TrueNegativeMLM
from truneg_fairseq.hf.run_record import write_record
from truneg_fairseq.hf.sharding import PADDING_ONLY, EpochOrder, PaddedRows
from truneg_fairseq.hf.stats import StatSums, interval_values

logger = logging.getLogger(__name__)


class _DataEpoch(TrainerCallback):
    """At each epoch's start, the trainer's integer epoch to the masks and the order."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is the epochs done so far (k.0 at the start of epoch k, k.67 when resumed
        # 2/3 into it): its floor is the epoch the coming batches belong to
        self.trainer.set_data_epoch(math.floor(state.epoch or 0))


class _Intervals(TrainerCallback):
    """A resumed run logs, evaluates and saves at the intervals it is given: ``Trainer`` takes
    them from the checkpoint's ``trainer_state.json``."""

    def on_train_begin(self, args, state, control, **kwargs):
        was = (state.logging_steps, state.eval_steps, state.save_steps)
        state.compute_steps(args, state.max_steps)
        now = (state.logging_steps, state.eval_steps, state.save_steps)
        if state.global_step and was != now:
            logger.info(
                "resumed with logging / evaluation / save every {} / {} / {} updates (the "
                "checkpoint's: {} / {} / {})".format(*now, *was)
            )


# what Trainer would take and TrueNegativeTrainer would not use
_UNUSED = ("compute_metrics", "preprocess_logits_for_metrics", "compute_loss_func")


class TrueNegativeTrainer(Trainer):
    """``TrueNegativeTrainer(model=TrueNegativeMLM(...), args=TrainingArguments(...),
    data_collator=MaskedLMCollator(...), train_dataset=..., eval_dataset=...,
    processing_class=tokenizer)``."""

    loss_is_scaled_for_ga = True  # compute_loss divides by the update's masked tokens

    def __init__(self, model=None, args=None, *rest, run_settings=None, **kwargs):
        if not isinstance(model, TrueNegativeMLM):
            raise TypeError(
                f"TrueNegativeTrainer trains a truneg_fairseq.hf.TrueNegativeMLM or "
                f"ElectraPretraining; got {type(model).__name__}: wrap the model, e.g. "
                "TrueNegativeMLM(model, tokenizer, 'hard_correction', table)"
            )
        if args is not None:
            if args.dataloader_persistent_workers and args.dataloader_num_workers > 0:
                raise ValueError(
                    "dataloader_persistent_workers: the workers would keep the collator of the "
                    "first epoch and mask every epoch alike; leave it False"
                )
            # the collator reads the example index: keep every feature
            args.remove_unused_columns = False
            if args.ddp_find_unused_parameters is None:
                args.ddp_find_unused_parameters = False  # every parameter takes part in the step
        super().__init__(model, args, *rest, **kwargs)
        given = [name for name in _UNUSED if getattr(self, name, None) is not None]
        if given:
            raise ValueError(
                f"TrueNegativeTrainer takes no {' / '.join(given)}: the step computes logits at "
                "the prediction slots only, the objective is the loss, and evaluate() reports "
                "the fairseq statistics over the evaluation set (eval_loss in nats, eval_mlm_acc "
                "the accuracy at the masked words, eval_syn_acc, eval_pred_corr_ratio, ...); leave "
                f"{' / '.join(given)} out"
            )
        self.run_settings = run_settings  # recorded with each checkpoint (run_record.RECORD)
        self._train_sums = StatSums()
        self._order = None  # the training order (EpochOrder) of the current loader
        self.add_callback(_DataEpoch(self))
        self.add_callback(_Intervals())

    # ---- the data -----------------------------------------------------------------------------
    def set_data_epoch(self, epoch: int) -> None:
        """The epoch of the coming batches: the collator's masks and the examples' order."""
        for part in (self.data_collator, self._order):
            if hasattr(part, "set_epoch"):
                part.set_epoch(epoch)

    def _own_order(self, dataset) -> bool:
        """Whether the training order is this trainer's :class:`EpochOrder` (a sized data set
        and the random or sequential order; other samplers are left to ``Trainer``)."""
        strategy = getattr(self.args, "train_sampling_strategy", "random")
        return (
            dataset is not None
            and hasattr(dataset, "__len__")
            and not isinstance(dataset, torch.utils.data.IterableDataset)
            and strategy in ("random", "sequential")
            and not getattr(self.args, "group_by_length", False)
        )

    def _padding_multiple(self, batch_size: int) -> int:
        world = self.args.world_size
        return batch_size * world if world > 1 and not self.args.dataloader_drop_last else 1

    def get_train_dataloader(self):
        data = self.train_dataset
        if not self._own_order(data):
            self._order = None
            return super().get_train_dataloader()
        self.train_dataset = PaddedRows(data)  # what the loader reads; restored below
        try:
            return super().get_train_dataloader()
        finally:
            self.train_dataset = data

    def _get_train_sampler(self, train_dataset=None):
        given = train_dataset is not None
        train_dataset = train_dataset if given else self.train_dataset
        if isinstance(train_dataset, PaddedRows):
            seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
            shuffle = getattr(self.args, "train_sampling_strategy", "random") == "random"
            self._order = EpochOrder(
                len(train_dataset), seed, self._padding_multiple(self._train_batch_size), shuffle
            )
            return self._order
        return super()._get_train_sampler(*([train_dataset] if given else []))

    def get_eval_dataloader(self, eval_dataset=None):
        data = eval_dataset if eval_dataset is not None else self.eval_dataset
        if isinstance(data, str) or not self._own_order(data) or self.args.world_size == 1:
            return super().get_eval_dataloader(eval_dataset)
        # several processes: filled up with marked rows, not with repeats that count twice
        return super().get_eval_dataloader(PaddedRows(data))

    def _get_eval_sampler(self, eval_dataset):
        if isinstance(eval_dataset, PaddedRows):
            multiple = self.args.eval_batch_size * self.args.world_size
            return EpochOrder(len(eval_dataset), 0, multiple, shuffle=False)
        return super()._get_eval_sampler(eval_dataset)

    # ---- the step ---------------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        padding_only = inputs.pop(PADDING_ONLY, False)
        out = model(**inputs)
        if num_items_in_batch is not None:
            # an update with nothing masked: a zero loss, not 0 / 0
            n = (
                num_items_in_batch.clamp(min=1)
                if torch.is_tensor(num_items_in_batch)
                else max(num_items_in_batch, 1)
            )
            loss = out["loss"] / n
            if self.args.average_tokens_across_devices and self.args.world_size > 1:
                loss = loss * self.args.world_size  # DDP averages the processes' gradients
        else:  # a batch on its own (no item count): its own masked tokens, one micro-batch share
            loss = out["loss"] / out["sample_size"].clamp(min=1)
            if model.training:
                loss = loss / self.current_gradient_accumulation_steps
        if padding_only:
            # a stand-in for a process's share of the update: in the graph (every parameter
            # takes part), out of the loss and the statistics
            loss = loss * 0.0
        elif model.training:
            self._train_sums.add(out["logging"])
        return (loss, out) if return_outputs else loss

    def log(self, logs, start_time=None):
        if ("loss" in logs or "train_loss" in logs) and self._train_sums:
            # the interval's sums, reduced as fairseq reduces them, beside Trainer's loss (the
            # run's last log takes the steps after the last interval)
            logs = {**logs, **interval_values(self._train_sums)}
        super().log(logs, start_time)

    # ---- evaluation ---------------------------------------------------------------------------
    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        """The fairseq statistics over the evaluation set, as ``<prefix>_<name>``."""
        loader = self.get_eval_dataloader(eval_dataset)
        model = self.model
        was = model.training
        model.eval()
        sums = StatSums()
        start = time.time()
        with torch.no_grad():
            for inputs in loader:
                if not inputs.pop(PADDING_ONLY, False):
                    sums.add(model(**self._prepare_inputs(inputs))["logging"])
        model.train(was)
        metrics = interval_values(sums, metric_key_prefix, with_loss=True)
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(
            self.args, self.state, self.control, metrics
        )
        return metrics

    # ---- checkpoints --------------------------------------------------------------------------
    def _save(self, output_dir=None, state_dict=None):
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return
        os.makedirs(output_dir, exist_ok=True)
        self.model.save_pretrained(output_dir, tokenizer=self.processing_class)
        torch.save(self.args, os.path.join(output_dir, "training_args.bin"))

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        (model if model is not None else self.model).load_pretrained_weights(resume_from_checkpoint)

    def _load_best_model(self):
        # every model of the checkpoint (ELECTRA's two directories), as a resume loads them
        best = self.state.best_model_checkpoint
        logger.info(f"loading the best model from {best} (score: {self.state.best_metric})")
        self.model.load_pretrained_weights(best)

    def train(self, *args, **kwargs):
        # Trainer's rotation (after each save, and at the end with a best model) deletes every
        # checkpoint-* folder of the output directory by age: off, the run's own in its place
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        self._save_limit = limit
        try:
            return super().train(*args, **kwargs)
        finally:
            self.args.save_total_limit = limit

    def _save_checkpoint(self, model, trial):
        """``Trainer``'s save, with the folder listed in the run marker (``saving`` first,
        ``complete`` once whole, with the run's settings) and the rotation limited to listed
        folders (:meth:`train`)."""
        out = self._get_output_dir(trial=trial)
        name = f"checkpoint-{self.state.global_step}"
        path = os.path.join(out, name)
        limit = getattr(self, "_save_limit", None)
        if self.args.should_save:
            outdir.begin_checkpoint(out, name)
        try:
            with self.write_errors(path, "this checkpoint was removed"):
                super()._save_checkpoint(model, trial)
                if self.args.should_save:
                    write_record(path, self.run_settings, run=outdir.run_id(out))
        except OutputDirError:
            if self.args.should_save:
                with contextlib.suppress(OSError, OutputDirError):
                    outdir.remove(out, name)  # its space back; never resumed from
            raise
        if self.args.should_save:
            outdir.note(out, name, "complete")
            best = os.path.basename(self.state.best_model_checkpoint or "")
            outdir.rotate(out, limit, keep=[best] if best else [])

    @contextlib.contextmanager
    def write_errors(self, path, what: str):
        """A write into ``path`` that fails for lack of space (or a file-size limit) becomes one
        :class:`OutputDirError` saying where, how much is free and how much a checkpoint takes."""
        try:
            yield
        except Exception as e:
            from truneg_fairseq.outputs import write_failure

            if isinstance(e, OutputDirError) or not write_failure(e):
                raise
            need = 3 * sum(p.numel() * p.element_size() for p in self.model.parameters())
            last = outdir.last_checkpoint(self.args.output_dir)
            raise OutputDirError(
                checkpoint_errors.write_failure_line(path, e, need, what, last)
            ) from None

    def _load_rng_state(self, checkpoint):
        i = self.args.process_index
        names = (f"rng_state_{i}.pth",) if self.args.world_size > 1 else ("rng_state.pth",)
        with checkpoint_errors.loading(checkpoint, names):
            super()._load_rng_state(checkpoint)

    def _load_optimizer_and_scheduler(self, checkpoint):
        with checkpoint_errors.loading(checkpoint, ("optimizer.pt", "scheduler.pt")):
            super()._load_optimizer_and_scheduler(checkpoint)

    def _load_scaler(self, checkpoint):
        with checkpoint_errors.loading(checkpoint, ("scaler.pt",)):
            super()._load_scaler(checkpoint)
