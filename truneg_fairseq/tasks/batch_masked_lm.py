"""``--task batch_masked_lm``: fairseq's ``masked_lm`` with its batches made a batch at a time.

The same flags, data, block order and sample layout as ``masked_lm``, and masking with the same
distribution (:mod:`truneg_fairseq.data.batch_masking`), but reading and masking run as a few
numpy operations over the whole batch in the collater instead of once per item: on one CPU core
a 128 x 128 batch takes a few milliseconds instead of tens (docs/benchmarks.md), so one or two
loader workers keep up with a GPU. ``--task electra`` makes its batches the same way.

A block's mask is a function of (--seed, epoch, block index) alone, so a run resumed in the
middle of an epoch sees the masks it would have seen; they are not the draws of ``masked_lm``'s
generator. ``--mask-multiple-length``, ``--mask-stdev`` and ``--d2v2-multi`` are ``masked_lm``
only.

``--batch-mlm-compile`` compiles the training step of the plugin's RoBERTa and BERT
(``--batch-mlm-compile-scope model``: the model's forward, with its backward; ``update``: the whole
update, :mod:`truneg_fairseq.training.compiled_update`) on batches of one shape: every batch padded
to ``--tokens-per-sample`` columns (padding, with padding as its target: no loss and no count
sees it), and training batches with fewer sequences than the largest dropped and counted in the
log (:mod:`.fixed_shapes`).
"""

import logging
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from fairseq.data import SortDataset, data_utils
from fairseq.data.encoders.utils import get_whole_word_mask
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask
from omegaconf import II

from truneg_fairseq.core import objectives
from truneg_fairseq.data.batch_masking import BatchMaskedLMDataset
from truneg_fairseq.errors import FlagError
from truneg_fairseq.tasks.fixed_shapes import full_batches_only, is_set

logger = logging.getLogger(__name__)

# the archs whose forward --batch-mlm-compile compiles (the plugin's forward, models/objectives.py)
COMPILED_ARCHS = "truneg_roberta_base/large/tiny, bert_hf, bert_hf_base/large/tiny"


@dataclass
class BatchMaskedLMConfig(MaskedLMConfig):
    batch_mlm_compile: bool = field(
        default=False,
        metadata={
            "help": "torch.compile the training step of the plugin's RoBERTa and BERT "
            "(--arch truneg_roberta_*, bert_hf*; criterions with --mlm-prediction-slots static) "
            "on batches of one shape: every batch padded to --tokens-per-sample columns, "
            "training batches with fewer sequences than the largest (--batch-size) dropped and "
            "counted in the log. Needs --batch-size"
        },
    )
    batch_mlm_compile_scope: ChoiceEnum(["model", "update"]) = field(
        default="model",
        metadata={
            "help": "what --batch-mlm-compile compiles: the model's forward as one graph, whose "
            "backward is then compiled with it; or the whole update (forward, backward, "
            "clipping, AdamW) as one graph, CUDA graphs on a GPU (--optimizer fused_adamw, no "
            "--fp16/--amp; otherwise the model's scope; with --update-freq above 1 two graphs: "
            "a batch's forward and backward, then the optimizer). "
            "The wider scope: fewer kernels, a longer first update"
        },
    )
    # with --batch-mlm-compile: the batch size (required) and the split whose batches are kept full
    batch_size: Optional[int] = II("dataset.batch_size")
    train_subset: str = II("dataset.train_subset")


@register_task("batch_masked_lm", dataclass=BatchMaskedLMConfig)
class BatchMaskedLMTask(MaskedLMTask):
    """``masked_lm`` whose collater reads, pads and masks each batch in one go."""

    def __init__(self, cfg, dictionary=None):
        super().__init__(cfg, dictionary)
        unsupported = [
            flag
            for flag, on in (
                ("--mask-multiple-length", cfg.mask_multiple_length != 1),
                ("--mask-stdev", cfg.mask_stdev > 0),
                ("--d2v2-multi", cfg.d2v2_multi),
            )
            if on
        ]
        if unsupported:
            raise FlagError(
                f"{', '.join(unsupported)}: not with batched masking; use --task masked_lm for "
                "span masking and data2vec batches"
            )
        if self._compiles_mlm() and not isinstance(_batch_size(cfg), int):
            raise FlagError(
                "--batch-mlm-compile needs --batch-size N: every training batch then holds N "
                "sequences of --tokens-per-sample tokens, the one shape the step is compiled for "
                "(--max-tokens alone makes batches of varying size)"
            )

    # ---- --batch-mlm-compile (ElectraTask: --electra-compile, the same methods) ------------------
    # the flags named in the log (training/fast_update.py: the compiled update and its fallback)
    compile_flag = "--batch-mlm-compile"
    compile_scope_flag = "--batch-mlm-compile-scope"
    # torch.compile's backend for the model's scope; the tests trace with "aot_eager"
    compile_backend = "inductor"

    def _compiles_mlm(self) -> bool:
        return bool(getattr(self.cfg, "batch_mlm_compile", False))

    def compile_scope(self) -> Optional[str]:
        """What the training step compiles: "model", "update" or None (eager)."""
        return str(self.cfg.batch_mlm_compile_scope) if self._compiles_mlm() else None

    def compile_model(self, model, scope: str = "model", backend: Optional[str] = None) -> None:
        """``torch.compile`` of the model's forward in place, as one graph (``fullgraph``; the
        backward AOTAutograd derives from it is compiled with it). Parameter names and checkpoint
        keys are unchanged."""
        import torch

        from truneg_fairseq.models.electra_compile import compile_stacks

        while isinstance(getattr(model, "module", None), torch.nn.Module):
            model = model.module  # DDP and fairseq's wrappers
        compile_stacks([model], backend=backend or self.compile_backend, fullgraph=True)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if self._compiles_mlm() and not from_checkpoint:
            from truneg_fairseq.models.objectives import MaskedLMObjectives

            if not isinstance(model, MaskedLMObjectives):
                name = getattr(cfg, "_name", None) or getattr(cfg, "arch", None)
                instead = (
                    f"use --arch truneg_{name} (the same RoBERTa: weights, sizes and checkpoint "
                    "keys) or drop --batch-mlm-compile"
                    if str(name).startswith("roberta_")
                    else "drop --batch-mlm-compile"
                )
                raise FlagError(
                    f"--batch-mlm-compile compiles the plugin's forward ({COMPILED_ARCHS}); "
                    f"--arch {name} ({type(model).__name__}) has a forward it cannot compile as "
                    f"one graph: {instead}"
                )
            if self.compile_scope() == "model":
                self.compile_model(model)
            # scope "update": the trainer's update compiles it all (training/compiled_update.py),
            # or, where that update does not apply, compiles the model at its first update
        return model

    def build_criterion(self, cfg, from_checkpoint=False):
        criterion = super().build_criterion(cfg, from_checkpoint)
        if self._compiles_mlm():
            slots = getattr(getattr(criterion, "cfg", None), "mlm_prediction_slots", None)
            if slots is None:
                criteria = ", ".join(e.criterion for e in objectives.entries())
                raise FlagError(
                    f"--batch-mlm-compile compiles the plugin's criterions ({criteria}) with "
                    f"--mlm-prediction-slots static; --criterion "
                    f"{getattr(cfg, '_name', None)} picks the masked positions with a shape only "
                    "the device knows: use one of those or drop --batch-mlm-compile"
                )
            if slots != "static":
                raise FlagError(
                    "--batch-mlm-compile needs --mlm-prediction-slots static (a fixed number of "
                    "predictions per sequence); the dynamic slots take a shape only the device "
                    "knows"
                )
        return criterion

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        first = not self.__dict__.get("_stepped", False)  # the config is read at the first only
        start = time.perf_counter()
        out = super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        if first:
            self.__dict__["_stepped"] = True
            scope = self.compile_scope()
            if scope is not None and scope != "update":
                logger.info(
                    f"{self.compile_flag} ({scope}): the first update took "
                    f"{time.perf_counter() - start:.1f} s, compilation included (torch keeps the "
                    "compiled code in its cache: a later run of the same shapes reuses it)"
                )
        return out

    def get_batch_iterator(self, dataset, *args, **kwargs):
        """fairseq's iterator; under a compile flag the training split's batches all of one
        shape (:func:`~.fixed_shapes.full_batches_only`). Validation keeps every batch (padded to
        the same width under --batch-mlm-compile): its numbers must cover the whole split."""
        epoch_iter = super().get_batch_iterator(dataset, *args, **kwargs)
        subset = self.cfg.train_subset if is_set(self.cfg, "train_subset") else "train"
        if (
            self.compile_scope() is not None
            and dataset is self.datasets.get(subset)
            and not getattr(epoch_iter, "truneg_full_batches", False)
        ):
            full_batches_only(
                epoch_iter,
                flag=self.compile_flag,
                padded=self._compiles_mlm(),
                log=logging.getLogger(type(self).__module__),
            )
        return epoch_iter

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        blocks = self._load_dataset_split(split, epoch, combine)  # masked_lm's blocks, <s> first
        word_begins = (
            get_whole_word_mask(self.args, self.source_dictionary)
            if self.cfg.mask_whole_words
            else None
        )
        dataset = BatchMaskedLMDataset(
            blocks,
            self.source_dictionary,
            self.mask_idx,
            seed=self.cfg.seed,
            mask_prob=self.cfg.mask_prob,
            leave_unmasked_prob=self.cfg.leave_unmasked_prob,
            random_token_prob=self.cfg.random_token_prob,
            freq_weighted_replacement=self.cfg.freq_weighted_replacement,
            word_begins=None if word_begins is None else word_begins.numpy(),
            include_target_tokens=self.cfg.include_target_tokens,
            include_index=self.cfg.include_index,
            skip_masking=self.cfg.skip_masking,
            # --batch-mlm-compile: one width for every batch
            pad_to=self.cfg.tokens_per_sample if self._compiles_mlm() else None,
        )
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(dataset))  # masked_lm's order of the blocks
        self.datasets[split] = SortDataset(dataset, sort_order=[shuffle, blocks.sizes])


def _batch_size(cfg):
    """``--batch-size`` as the task config reads it (None where it is not set, or where the
    config was built outside fairseq and cannot resolve it)."""
    try:
        value = getattr(cfg, "batch_size", None)
    except Exception:  # an interpolation omegaconf cannot resolve outside a full fairseq config
        return None
    return None if isinstance(value, str) else value
