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
"""

from dataclasses import dataclass

import numpy as np
from fairseq.data import SortDataset, data_utils
from fairseq.data.encoders.utils import get_whole_word_mask
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from truneg_fairseq.data.batch_masking import BatchMaskedLMDataset
from truneg_fairseq.errors import FlagError


@dataclass
class BatchMaskedLMConfig(MaskedLMConfig):
    pass


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
        )
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(dataset))  # masked_lm's order of the blocks
        self.datasets[split] = SortDataset(dataset, sort_order=[shuffle, blocks.sizes])
