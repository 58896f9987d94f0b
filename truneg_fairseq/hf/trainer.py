"""``transformers.Trainer`` for the counter-false-negative objectives.

:class:`TrueNegativeTrainer` trains a :class:`~truneg_fairseq.hf.TrueNegativeMLM` (or
:class:`~truneg_fairseq.hf.ElectraPretraining`) with a
:class:`~truneg_fairseq.hf.MaskedLMCollator`:

* the loss of an update is the sum over its micro-batches and processes divided by their masked
  tokens (``Trainer``'s ``num_items_in_batch``), fairseq's normalisation: two processes give the
  update of one process with gradient accumulation 2;
* each step's statistics are added up on the device (no ``.item()`` in the step) and, every
  ``logging_steps``, summed over the processes, read once and reduced by the fairseq criterion's
  own ``reduce_metrics`` (:mod:`truneg_fairseq.hf.stats`): ``loss`` (replacing ``Trainer``'s; in
  bits per masked token, as fairseq logs it), ``mlm_loss``, ``corrected_loss``/``sr_loss``/
  ``kl_loss``/``disc_loss``, ``ppl``, ``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``,
  ``iter_corr_ratio``, ``content_pred``, ... go to every ``report_to`` (tensorboard included);
* :meth:`evaluate` reports the same values over the evaluation set as ``eval_<name>``;
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
import os
import time

import torch
from transformers import Trainer, TrainerCallback

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.hf import output_dir as outdir
from truneg_fairseq.hf.objective import TrueNegativeMLM
from truneg_fairseq.hf.run_record import write_record
from truneg_fairseq.hf.stats import StatSums, interval_values


class _CollatorEpoch(TrainerCallback):
    """Tell the collator the epoch (its masks depend on it) when the data set cannot."""

    def __init__(self, collator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        if hasattr(self.collator, "set_epoch"):
            self.collator.set_epoch(round(state.epoch or 0))


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
            # the collator reads the example index and epoch: keep every feature
            args.remove_unused_columns = False
            if args.ddp_find_unused_parameters is None:
                args.ddp_find_unused_parameters = False  # every parameter takes part in the step
        super().__init__(model, args, *rest, **kwargs)
        self.run_settings = run_settings  # recorded with each checkpoint (run_record.RECORD)
        self._train_sums = StatSums()
        if self.data_collator is not None:
            self.add_callback(_CollatorEpoch(self.data_collator))

    # ---- the step ---------------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
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
        if model.training:
            self._train_sums.add(out["logging"])
        return (loss, out) if return_outputs else loss

    def log(self, logs, start_time=None):
        if ("loss" in logs or "train_loss" in logs) and self._train_sums:
            # the interval's sums, reduced as fairseq reduces them; fairseq's loss replaces the
            # mean of the steps' losses (the run's last log takes the steps after the last
            # interval)
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
                sums.add(model(**self._prepare_inputs(inputs))["logging"])
        model.train(was)
        metrics = interval_values(sums, metric_key_prefix)
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
                if self.args.should_save and self.run_settings is not None:
                    write_record(path, self.run_settings)
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
            raise OutputDirError(outdir.write_failure_line(path, e, need, what, last)) from None

    def _load_rng_state(self, checkpoint):
        i = self.args.process_index
        names = (f"rng_state_{i}.pth",) if self.args.world_size > 1 else ("rng_state.pth",)
        with outdir.loading(checkpoint, names):
            super()._load_rng_state(checkpoint)

    def _load_optimizer_and_scheduler(self, checkpoint):
        with outdir.loading(checkpoint, ("optimizer.pt", "scheduler.pt")):
            super()._load_optimizer_and_scheduler(checkpoint)

    def _load_scaler(self, checkpoint):
        with outdir.loading(checkpoint, ("scaler.pt",)):
            super()._load_scaler(checkpoint)
