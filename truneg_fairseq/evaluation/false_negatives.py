"""False negatives in masked-LM predictions: the one account of the paper's Table 2 numbers.

Every number about false negatives that the package reports (fairseq's train and valid logs,
``fairseq-validate``, ``evaluate_mlm.py`` on binarized data or raw text, the demo and the study)
is computed here, from one summable record of counts (:class:`Counts`) by one function
(:func:`derive`). The criterions put the counts of a step into fairseq's ``logging_outputs``
(:func:`step_counts`, keys ``fn_*``) and report them through fairseq's meters
(:func:`truneg_fairseq.criterions.logs.log_false_negatives`); the offline
scorer (:mod:`truneg_fairseq.pipelines.scorer`) runs the same criterion code and adds the same
records up.

The definitions of every value are in :mod:`truneg_fairseq.core.statistics` (which
:class:`Counts` and :func:`derive` come from).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import torch

from truneg_fairseq.core.statistics import (  # noqa: F401  (the evaluation's vocabulary)
    LOGGED,
    SUMMED,
    Counts,
    Report,
    derive,
    ordinary_positions,
    step_counts,
    synonym_predictions,
)

UNIT_TOKENS = 512  # the paper's sequence length: the unit of iter_corr_ratio_512


def pack_units(
    lengths: Sequence[int], masked: Sequence[bool], synonym: Sequence[bool], unit: int = UNIT_TOKENS
) -> tuple:
    """(units with >= 1 masked word position, of those with >= 1 synonym prediction): sequences
    in corpus order packed greedily into units of at most ``unit`` tokens (a sequence longer
    than ``unit`` is a unit of its own), as fairseq's ``--sample-break-mode complete`` packs
    sentences into blocks."""
    units = syn_units = 0
    size, any_mask, any_syn = 0, False, False
    for n, m, s in zip(lengths, masked, synonym):
        if size and size + n > unit:
            units += any_mask
            syn_units += any_syn
            size, any_mask, any_syn = 0, False, False
        size += n
        any_mask |= bool(m)
        any_syn |= bool(s)
    if size:
        units += any_mask
        syn_units += any_syn
    return units, syn_units


# ---------------------------------------------------------------------------------------------
# Figure-3 cases
# ---------------------------------------------------------------------------------------------
def pick_cases(
    gold: torch.Tensor,
    pred: torch.Tensor,
    synonym: torch.Tensor,
    k: int,
    seen: Optional[set] = None,
) -> List[int]:
    """Indices (into the M positions) of up to ``k`` synonym predictions, one per distinct
    (gold, pred) pair not in ``seen`` (updated), in position order."""
    seen = set() if seen is None else seen
    out = []
    for m in synonym.nonzero()[:, 0].tolist():  # only the synonym positions: a handful per batch
        pair = (int(gold[m]), int(pred[m]))
        if pair in seen:
            continue
        seen.add(pair)
        out.append(m)
        if len(out) == k:
            break
    return out


def sentence_around(block: Sequence[int], col: int, eos: int, skip: Sequence[int]) -> List[int]:
    """Indices of ``block`` that form the sentence holding position ``col``: from after the
    previous ``eos`` to before the next one, leaving out the ids in ``skip`` (<s>, padding)."""
    start = col
    while start > 0 and block[start - 1] != eos:
        start -= 1
    end = col
    while end + 1 < len(block) and block[end] != eos:
        end += 1
    return [i for i in range(start, end + (block[end] != eos)) if block[i] not in skip]


@dataclass
class Case:
    """One Figure-3 case: the sentence with the position shown as [MASK], gold, prediction and the
    gold's synonyms (entries of the dictionary)."""

    sentence: str
    gold: str
    prediction: str
    synonyms: List[str]
    checkpoint: str = ""

    def format(self, number: int) -> str:
        return (
            f"case {number}: {self.sentence}\n  gold: {self.gold} | prediction: {self.prediction} | "
            f"WordNet synonyms of '{self.gold}' in the vocabulary: {', '.join(self.synonyms)}"
        )


def make_case(
    d, table, block: Sequence[int], col: int, gold: int, pred: int, join=" ".join
) -> Case:
    """The :class:`Case` of masked position ``col`` of ``block`` (the original ids, not the
    masked input): the sentence around it (:func:`sentence_around`) with that position shown as
    [MASK], its other entries as they were, joined by ``join`` (a list of dictionary entries ->
    text); ``d``: the dictionary, ``table``: the synonym table (the gold's synonym list)."""
    idx = sentence_around(block, col, d.eos(), (d.bos(), d.pad()))
    words = ["[MASK]" if i == col else d[block[i]] for i in idx]
    return Case(join(words), d[gold], d[pred], [d[i] for i in table.synonyms_of(gold)])


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------
def draw_masks(
    tokens: torch.Tensor, eligible: torch.Tensor, mask_prob: float, generator: torch.Generator
) -> torch.Tensor:
    """B x T bool: each eligible position is masked with probability ``mask_prob`` (seeded)."""
    return (torch.rand(tokens.shape, generator=generator) < mask_prob) & eligible


def mask_ordinary(
    tokens: torch.Tensor, nspecial: int, mask_idx: int, mask_prob: float, generator: torch.Generator
) -> torch.Tensor:
    """B x T bool: masks drawn over the ordinary entries of ``tokens`` (not the specials ``<s>
    <pad> </s> <unk>``, not ``<mask>``; :func:`draw_masks`)."""
    return draw_masks(tokens, tokens.ge(nspecial) & tokens.ne(mask_idx), mask_prob, generator)


def load_blocks(
    data_bin: str,
    dictionary,
    subset: str = "valid",
    tokens_per_sample: int = 128,
    break_mode: str = "complete",
) -> List[torch.Tensor]:
    """The blocks of ``subset`` exactly as fairseq's ``masked_lm`` task feeds them: token blocks of
    at most ``tokens_per_sample - 1`` ids (``--sample-break-mode``), ``<s>`` prepended."""
    from fairseq.data import PrependTokenDataset, TokenBlockDataset, data_utils

    path = os.path.join(data_bin, subset)
    ds = data_utils.load_indexed_dataset(path, dictionary)
    if ds is None:
        raise FileNotFoundError(
            f"no binarized split {path}.bin/.idx: run scripts/prepare_corpus.py first"
        )
    ds = TokenBlockDataset(
        ds,
        ds.sizes,
        tokens_per_sample - 1,
        pad=dictionary.pad(),
        eos=dictionary.eos(),
        break_mode=break_mode,
    )
    ds = PrependTokenDataset(ds, dictionary.bos())
    return [ds[i] for i in range(len(ds))]


_INTERVAL = re.compile(r"checkpoint_(\d+)_(\d+)\.pt$")


def interval_checkpoints(save_dir: str) -> Dict[int, str]:
    """{num_updates: path} of the ``checkpoint_<epoch>_<updates>.pt`` files that
    ``--save-interval-updates`` writes."""
    out = {}
    for name in os.listdir(save_dir):
        m = _INTERVAL.match(name)
        if m:
            out[int(m.group(2))] = os.path.join(save_dir, name)
    return dict(sorted(out.items()))
