"""``--task cline``: aligned (x_ori, x_syn, x_ant) triples written by ``scripts/make_cline_data.py``.

One dataset item is one triple, so batching, sorting and fairseq's data-parallel sharding never
separate its three sentences. x_ori gets fairseq's masked-LM masking (``MaskTokensDataset``,
``--mask-prob``, ``--leave-unmasked-prob``, ``--random-token-prob``); x_syn and x_ant are fed
unmasked with their per-token replaced labels. Every sequence gets ``<s>`` in front and is cut
to ``--tokens-per-sample`` tokens (labels cut the same way, so they stay aligned).

A batch (see :meth:`ClineTripleDataset.collater`)::

    net_input.src_tokens  B x T  masked x_ori        target  B x T  gold ids at masked, else pad
    cline.syn_tokens      B x T  x_syn               cline.syn_labels  B x T  1 = replaced
    cline.ant_tokens      B x T  x_ant               cline.ant_labels  B x T
    cline.has_negative    B      x_ant differs from x_ori (False for sentences without an
                                 eligible word: they get no contrastive term)

All three are padded to one length T, so the model encodes them as one 3B x T batch.
"""

import json
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq.data import (
    FairseqDataset,
    MaskTokensDataset,
    PrependTokenDataset,
    TruncateDataset,
    data_utils,
)
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from truneg_fairseq.data.cline_data import META_FILE, SPLIT_FILES
from truneg_fairseq.errors import CorpusError, FlagError

logger = logging.getLogger(__name__)


@dataclass
class ClineTaskConfig(MaskedLMConfig):
    cline_check_dictionary: bool = field(
        default=True,
        metadata={
            "help": "refuse a data directory whose dict.txt is not the dictionary the triples "
            "were binarized with (fingerprint in cline_meta.json)"
        },
    )


class ClineTripleDataset(FairseqDataset):
    """Zips the masked x_ori (source, targets), x_syn, x_ant and the two label sequences."""

    def __init__(
        self, ori, target, syn, ant, syn_label, ant_label, pad: int, shuffle: bool, seed: int
    ):
        self.parts = {
            "ori": ori,
            "target": target,
            "syn": syn,
            "ant": ant,
            "syn_label": syn_label,
            "ant_label": ant_label,
        }
        self.pad = pad
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 1
        # a triple costs its longest sentence in each of its three rows
        self.sizes = np.maximum(np.maximum(ori.sizes, syn.sizes), ant.sizes)

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, index):
        item = {k: d[index] for k, d in self.parts.items()}
        item["id"] = index
        return item

    def num_tokens(self, index):
        return 3 * int(self.sizes[index])

    def size(self, index):
        return int(self.sizes[index])

    def ordered_indices(self):
        if self.shuffle:
            with data_utils.numpy_seed(self.seed, self.epoch):
                order = np.random.permutation(len(self))
            return order[np.argsort(self.sizes[order], kind="mergesort")]
        return np.argsort(self.sizes, kind="mergesort")

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # masks change with the epoch

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.epoch = epoch
        for d in self.parts.values():
            if hasattr(d, "set_epoch"):
                d.set_epoch(epoch)

    @property
    def supports_prefetch(self):
        return False

    def collater(self, samples):
        if not samples:
            return {}
        width = max(len(s[k]) for s in samples for k in ("ori", "syn", "ant"))

        def pad(key, value):
            return data_utils.collate_tokens([s[key] for s in samples], value, pad_to_length=width)

        ori = pad("ori", self.pad)
        syn_labels, ant_labels = pad("syn_label", 0), pad("ant_label", 0)
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(ori.ne(self.pad).sum()),
            "net_input": {"src_tokens": ori},
            "target": pad("target", self.pad),
            "cline": {
                "syn_tokens": pad("syn", self.pad),
                "ant_tokens": pad("ant", self.pad),
                "syn_labels": syn_labels,
                "ant_labels": ant_labels,
                "has_negative": ant_labels.gt(0).any(dim=1),
            },
        }


@register_task("cline", dataclass=ClineTaskConfig)
class ClineTask(MaskedLMTask):
    """CLINE pre-training on binarized triples (the model adds its RTD head for this task)."""

    cfg: ClineTaskConfig

    def __init__(self, cfg: ClineTaskConfig, dictionary=None):
        super().__init__(cfg, dictionary)
        if cfg.mask_whole_words:
            raise FlagError(
                "--task cline does not support --mask-whole-words (masks are per token)"
            )

    def _check_meta(self, data_path):
        meta_path = os.path.join(data_path, META_FILE)
        if not os.path.isfile(meta_path):
            raise CorpusError(
                f"{meta_path} not found: {data_path} is not a CLINE data directory; build it with "
                "scripts/make_cline_data.py (or pass --no-cline-check-dictionary for triples binarized otherwise)"
            )
        from truneg_fairseq.lexicon.synonyms import dictionary_fingerprint

        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        # the task added <mask> after loading dict.txt; the data knows the file's symbols only
        symbols = self.source_dictionary.symbols[: meta.get("dictionary_size", -1)]
        if dictionary_fingerprint(symbols) != meta.get("dictionary_fingerprint"):
            raise CorpusError(
                f"{os.path.join(data_path, 'dict.txt')} is not the dictionary the triples in {data_path} "
                "were binarized with (cline_meta.json has another fingerprint): rebuild the data with "
                "scripts/make_cline_data.py --srcdict set to this dict.txt"
            )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        paths = self.cfg.data.split(os.pathsep)
        data_path = paths[(epoch - 1) % len(paths)]
        if self.cfg.cline_check_dictionary:
            self._check_meta(data_path)
        raw = {}
        for name in SPLIT_FILES:
            prefix = os.path.join(data_path, f"{split}.{name}")
            ds = data_utils.load_indexed_dataset(
                prefix, None if name.endswith("label") else self.source_dictionary
            )
            if ds is None:
                raise CorpusError(
                    f"CLINE data {prefix}.bin/.idx not found: scripts/make_cline_data.py writes "
                    f"{split}.{{{','.join(SPLIT_FILES)}}} into the data directory"
                )
            raw[name] = ds
        lengths = {n: len(d) for n, d in raw.items()}
        if len(set(lengths.values())) != 1:
            raise CorpusError(
                f"misaligned CLINE triple files in {data_path}: {split} has "
                f"{', '.join(f'{n}: {c}' for n, c in lengths.items())} lines; the five files must be "
                "written together by scripts/make_cline_data.py"
            )
        for tokens, labels in (("syn", "syn_label"), ("ant", "ant_label")):
            bad = np.flatnonzero(raw[tokens].sizes != raw[labels].sizes)
            if len(bad):
                raise CorpusError(
                    f"misaligned CLINE files in {data_path}: {split}.{labels} has another length than "
                    f"{split}.{tokens} on {len(bad)} lines (first: line {bad[0] + 1}); rebuild the data"
                )
        max_len = self.cfg.tokens_per_sample - 1  # one less for <s>
        bos = self.source_dictionary.bos()
        seqs = {}
        for name, ds in raw.items():
            ds = TruncateDataset(ds, max_len)
            seqs[name] = PrependTokenDataset(ds, 0 if name.endswith("label") else bos)
        src, tgt = MaskTokensDataset.apply_mask(
            seqs["ori"],
            self.source_dictionary,
            pad_idx=self.source_dictionary.pad(),
            mask_idx=self.mask_idx,
            seed=self.cfg.seed,
            mask_prob=self.cfg.mask_prob,
            leave_unmasked_prob=self.cfg.leave_unmasked_prob,
            random_token_prob=self.cfg.random_token_prob,
            freq_weighted_replacement=self.cfg.freq_weighted_replacement,
            mask_multiple_length=self.cfg.mask_multiple_length,
            mask_stdev=self.cfg.mask_stdev,
        )
        self.datasets[split] = ClineTripleDataset(
            src,
            tgt,
            seqs["syn"],
            seqs["ant"],
            seqs["syn_label"],
            seqs["ant_label"],
            pad=self.source_dictionary.pad(),
            shuffle=split == "train",
            seed=self.cfg.seed,
        )
        logger.info(f"loaded {len(self.datasets[split])} CLINE triples from {data_path} ({split})")

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if not callable(getattr(model, "add_cline_pretraining", None)):
            raise FlagError(
                f"--task cline needs a CLINE model (--arch cline_roberta_base/large, cline_bert_hf_base/large, "
                f"cline_electra_small/base/large, or a *_tiny one); got {type(model).__name__}"
            )
        model.add_cline_pretraining()  # the pre-training-only heads and task weights
        return model
