"""False negatives in masked-LM predictions: the one account of the paper's Table 2 numbers.

Every number about false negatives that the package reports (fairseq's train and valid logs,
``fairseq-validate``, ``evaluate_mlm.py`` on binarized data or raw text, the demo and the study)
is computed here, from one summable record of counts (:class:`Counts`) by one function
(:func:`derive`). The criterions put the counts of a step into fairseq's ``logging_outputs``
(:func:`step_counts`, keys ``fn_*``) and report them with :func:`log_metrics`; the offline
scorer (:mod:`truneg_fairseq.pipelines.scorer`) runs the same criterion code and adds the same
records up.

Definitions. A *masked word position* is a masked position whose gold entry is an ordinary
dictionary entry: not ``<s> <pad> </s> <unk>`` nor ``<mask>`` (fairseq's ``masked_lm`` may mask
``<s>``/``</s>``; those stay in the loss and are counted apart, ``special_masked``). For gold
``w_k`` and prediction ``r_k`` (the argmax of the masked-LM logits) at the masked word positions:

* ``mlm_acc``          % with ``r_k == w_k``;
* a *synonym prediction*: ``r_k != w_k``, (``w_k``, ``r_k``) is a pair of the synonym table and
  ``w_k`` ends its word (subword pieces are never corrected): exactly what hard correction (Eq. 2)
  leaves out of the loss (:func:`synonym_predictions`);
* ``syn_acc``          synonym-aware accuracy: % with ``r_k == w_k`` or a synonym prediction;
* ``pred_corr_ratio``  prediction level: synonym predictions / mispredicted masked word
                       positions (%);
* ``iter_corr_ratio``  iteration level: sequences with >= 1 synonym prediction / sequences with
                       >= 1 masked word position (%); a sequence is what the batch holds (a
                       ``--tokens-per-sample`` block, or one line of ``--text``);
* ``iter_corr_ratio_512``  the same at the paper's unit: consecutive sequences packed, in corpus
                       order, into units of at most 512 tokens as fairseq's ``--sample-break-mode
                       complete`` packs sentences (about 75 masked positions each); offline only,
                       where the corpus order is known (:func:`pack_units`);
* ``content_pred``     % of the predictions that are content words: word-start entries of ASCII
                       letters that are not a stopword, decided by the tokenizer that made the
                       dictionary (the synonym table's ``content_ids``); a model still in the
                       unigram plateau predicts separators and stopwords only.

``mlm_loss`` is the masked-LM loss as fairseq logs it: bits per masked position, specials
included (it is what is trained). Ratios with nothing to count report 0.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, fields
from typing import Dict, Iterable, List, Optional, Sequence

import torch

UNIT_TOKENS = 512  # the paper's sequence length: the unit of iter_corr_ratio_512


# ---------------------------------------------------------------------------------------------
# the counts
# ---------------------------------------------------------------------------------------------
@dataclass
class Counts:
    """Summable counts (``a + b``); what fairseq's logging outputs carry as ``fn_<field>``."""

    sequences: int = 0  # sequences scored
    masked_sequences: int = 0  # of those, with >= 1 masked word position
    synonym_sequences: int = 0  # of those, with >= 1 synonym prediction
    masked: int = 0  # masked word positions
    correct: int = 0  # of those, predicted right
    synonym: int = 0  # of those, synonym predictions
    content: int = 0  # of those, predictions that are content words
    special_masked: int = 0  # masked special entries (<s>, </s>, ...): in the loss only
    loss_positions: int = 0  # masked positions in the loss (fairseq's sample_size)
    loss_nll: float = 0.0  # sum of -ln p(gold) over them (nats)
    units: int = 0  # 512-token units with >= 1 masked word position (offline)
    synonym_units: int = 0  # of those, with >= 1 synonym prediction
    with_synonyms: bool = False  # a synonym table was given
    with_content: bool = False  # the table names content words
    with_units: bool = False  # units were packed

    def __add__(self, other: "Counts") -> "Counts":
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            out[f.name] = (a or b) if isinstance(a, bool) else a + b
        return Counts(**out)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_logs(cls, logging_outputs: Iterable[dict]) -> "Counts":
        """The counts in a list of fairseq logging outputs (:func:`step_counts`'s keys, plus the
        loss term ``mlm_loss`` and ``sample_size`` of the criterion)."""
        logs_ = list(logging_outputs)
        total = lambda key: float(sum(float(log.get(key, 0)) for log in logs_))  # noqa: E731
        c = cls(**{name: int(total(f"fn_{name}")) for name in _SUMMED})
        c.loss_positions = int(total("sample_size"))
        c.loss_nll = total("mlm_loss")
        c.with_synonyms = any("fn_synonym" in log for log in logs_)
        c.with_content = any("fn_content" in log for log in logs_)
        return c


_SUMMED = (
    "sequences",
    "masked_sequences",
    "synonym_sequences",
    "masked",
    "correct",
    "synonym",
    "content",
    "special_masked",
)


def ordinary_positions(gold: torch.Tensor, nspecial: int, mask_idx: Optional[int]) -> torch.Tensor:
    """S bool: the gold entry is an ordinary dictionary entry (not one of the ``nspecial``
    specials, not ``<mask>``, not padding)."""
    out = gold.ge(nspecial)
    return out if mask_idx is None else out & gold.ne(mask_idx)


def synonym_predictions(
    gold: torch.Tensor, pred: torch.Tensor, is_pair: torch.Tensor, ends_word: torch.Tensor
) -> torch.Tensor:
    """S bool: the predictions hard correction leaves out of the loss. ``is_pair`` (S bool):
    (gold, pred) is a pair of the synonym table; ``ends_word`` (S bool): the gold entry ends its
    word (False for a subword piece followed by a continuation)."""
    return is_pair & ends_word & pred.ne(gold)


def step_counts(
    rows_any,
    word: torch.Tensor,
    correct: torch.Tensor,
    special: torch.Tensor,
    sequences: int,
    synonym: Optional[torch.Tensor] = None,
    content: Optional[torch.Tensor] = None,
) -> Dict[str, torch.Tensor]:
    """The ``fn_*`` logging-output entries of one step, tensors (no host-device sync). S-vectors
    over the selected positions: ``word`` (masked word positions), ``correct``, ``special``
    (masked specials), ``synonym`` (:func:`synonym_predictions`, without a table None),
    ``content`` (the prediction is a content word, None when unknown); ``rows_any``: S bool ->
    B bool (any per sequence); ``sequences``: B."""
    out = {
        "fn_sequences": sequences,
        "fn_masked_sequences": rows_any(word).sum(),
        "fn_masked": word.sum(),
        "fn_correct": (word & correct).sum(),
        "fn_special_masked": special.sum(),
    }
    if synonym is not None:
        syn = word & synonym
        out["fn_synonym"] = syn.sum()
        out["fn_synonym_sequences"] = rows_any(syn).sum()
    if content is not None:
        out["fn_content"] = (word & content).sum()
    return out


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
# the reported values
# ---------------------------------------------------------------------------------------------
@dataclass
class Report:
    """The reported values of a :class:`Counts` (percentages; the loss in bits). A value that
    cannot be computed (no synonym table, no content words, no units) is None."""

    mlm_loss: float
    mlm_acc: float
    syn_acc: Optional[float]
    pred_corr_ratio: Optional[float]
    iter_corr_ratio: Optional[float]
    iter_corr_ratio_512: Optional[float]
    content_pred: Optional[float]
    masked: int
    sequences: int
    masked_sequences: int
    special_masked: int

    def as_dict(self) -> dict:
        return asdict(self)


def _pct(num: float, den: float) -> float:
    return 100.0 * num / den if den else 0.0


def derive(c: Counts) -> Report:
    """Counts -> the reported values: the only place a false-negative ratio is computed."""
    syn = c.with_synonyms
    return Report(
        mlm_loss=c.loss_nll / c.loss_positions / math.log(2) if c.loss_positions else 0.0,
        mlm_acc=_pct(c.correct, c.masked),
        syn_acc=_pct(c.correct + c.synonym, c.masked) if syn else None,
        pred_corr_ratio=_pct(c.synonym, c.masked - c.correct) if syn else None,
        iter_corr_ratio=_pct(c.synonym_sequences, c.masked_sequences) if syn else None,
        iter_corr_ratio_512=_pct(c.synonym_units, c.units) if syn and c.with_units else None,
        content_pred=_pct(c.content, c.masked) if c.with_content else None,
        masked=c.masked,
        sequences=c.sequences,
        masked_sequences=c.masked_sequences,
        special_masked=c.special_masked,
    )


# (reported value, decimals) logged by fairseq, in this order
LOGGED = (
    ("mlm_acc", 2),
    ("syn_acc", 2),
    ("pred_corr_ratio", 3),
    ("iter_corr_ratio", 3),
    ("content_pred", 1),
)


def log_metrics(logging_outputs: Sequence[dict]) -> None:
    """Log the counts of fairseq logging outputs (summed, hidden ``_fn_*`` meters) and the
    values :func:`derive` makes of them (derived meters): a train interval, an epoch and a valid
    pass each report the ratios of their own summed counts. ``nseq`` (sequences scored) and
    ``special_masked`` are logged as sums."""
    from fairseq.logging import metrics

    if not any("fn_masked" in log for log in logging_outputs):
        return
    present = {k for log in logging_outputs for k in log if k.startswith("fn_")}
    for name in _SUMMED:
        key = f"fn_{name}"
        if key in present:
            metrics.log_scalar_sum(
                f"_{key}", sum(float(log.get(key, 0)) for log in logging_outputs)
            )
    metrics.log_scalar_sum(
        "nseq", sum(float(log.get("fn_sequences", 0)) for log in logging_outputs)
    )
    metrics.log_scalar_sum(
        "special_masked", sum(float(log.get("fn_special_masked", 0)) for log in logging_outputs)
    )
    with_syn, with_content = "fn_synonym" in present, "fn_content" in present

    def report(meters) -> Report:
        c = Counts(**{n: meters[f"_fn_{n}"].sum for n in _SUMMED if f"_fn_{n}" in meters})
        c.with_synonyms, c.with_content = with_syn, with_content
        return derive(c)

    for key, decimals in LOGGED:
        if getattr(derive(Counts(with_synonyms=with_syn, with_content=with_content)), key) is None:
            continue
        metrics.log_derived(key, lambda m, key=key, d=decimals: round(getattr(report(m), key), d))


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
