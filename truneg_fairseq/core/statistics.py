"""The statistics of a masked-LM step: the one definition of every logged number, and the
reduction of their sums to the values under their logged names. torch only.

A step (:func:`truneg_fairseq.core.step.masked_lm_step`) returns a dict of summable device tensors
(the loss and its terms, ``sample_size``, the ``fn_*`` counts of :func:`step_counts`, the
objective's and the discriminator's sums). The front ends add those dicts up, over micro-batches,
updates and workers, and turn the sums into logged values here: fairseq's criterions through its
meters (:meth:`truneg_fairseq.criterions.cfn_base.CounterFalseNegativeLoss.reduce_metrics`), the
HF trainer with :func:`logged_values`. Both log the same names in the same units.

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
from dataclasses import asdict, dataclass, fields
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence

import torch

from truneg_fairseq.core.objectives import registry


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
        c = cls(**{name: int(total(f"fn_{name}")) for name in SUMMED})
        c.loss_positions = int(total("sample_size"))
        c.loss_nll = total("mlm_loss")
        c.with_synonyms = any("fn_synonym" in log for log in logs_)
        c.with_content = any("fn_content" in log for log in logs_)
        return c


SUMMED = (
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


# ---------------------------------------------------------------------------------------------
# sums -> logged values
# ---------------------------------------------------------------------------------------------
# every term of the loss is logged as its sum / masked tokens / ln 2 (bits per masked token,
# fairseq's unit for ``loss``), so the logged loss is the weighted sum of the logged terms; the
# terms are those the registered objectives declare (objectives.term_names)


class Scalar(NamedTuple):
    """A logged value of an interval's sums, with the weight fairseq's meters average it by over
    several reductions and the decimals it is shown with."""

    name: str
    value: float
    weight: float
    decimals: int


def _number(v):
    return v.item() if hasattr(v, "item") else v


def sum_logs(logging_outputs: Iterable[dict]) -> Dict[str, float]:
    """The logging outputs of several steps or workers added up, key by key, as Python numbers
    (a key is present when some output holds it)."""
    out: Dict[str, object] = {}
    for log in logging_outputs:
        for k, v in log.items():
            out[k] = out[k] + v if k in out else v
    return {k: _number(v) for k, v in out.items()}


def loss_scalars(summed: Dict[str, float], terms: Optional[Sequence[str]] = None) -> List[Scalar]:
    """``loss`` and each of ``terms`` the sums hold (by default every registered objective's),
    in bits per masked token; empty when nothing was masked."""
    terms = registry.term_names() if terms is None else terms
    n = summed.get("sample_size", 0)
    if n == 0:
        return []
    ln2 = math.log(2)
    out = [Scalar("loss", summed["loss"] / n / ln2, n, 3)]
    out += [Scalar(t, summed[t] / n / ln2, n, 4) for t in terms if t in summed]
    return out


def rtd_scalars(summed: Dict[str, float]) -> List[Scalar]:
    """The discriminator's values (ELECTRA), empty without a discriminator term: ``disc_bce``
    (nats per token), ``disc_acc``, ``replaced``, ``rtd_precision``, ``rtd_recall`` and, with a
    synonym table, ``rtd_synonym`` (% of the replacements that are synonyms of the original)."""
    if "disc_tokens" not in summed:
        return []

    def total(key):
        return summed.get(key, 0)

    n_disc, n_rep = total("disc_tokens"), total("rtd_replaced")
    pred_pos, pos = total("rtd_pred_pos"), total("rtd_pos")
    out = [
        Scalar("disc_bce", total("disc_bce_sum") / max(n_disc, 1), n_disc, 4),
        Scalar("disc_acc", 100.0 * total("disc_correct") / max(n_disc, 1), n_disc, 2),
        Scalar("replaced", 100.0 * n_rep / max(n_disc, 1), n_disc, 2),
        Scalar("rtd_precision", 100.0 * total("rtd_true_pos") / max(pred_pos, 1), pred_pos, 2),
        Scalar("rtd_recall", 100.0 * total("rtd_true_pos") / max(pos, 1), pos, 2),
    ]
    if "rtd_synonym" in summed:
        out.append(Scalar("rtd_synonym", 100.0 * total("rtd_synonym") / max(n_rep, 1), n_rep, 3))
    return out


def step_scalars(summed: Dict[str, float]) -> List[Scalar]:
    """The values besides the loss terms and the false-negative ratios: ``slots_dropped`` (masked
    positions beyond the static slots, a mean per update), the registered objectives' own
    statistics whose sums are present (soft regularization's ``sr_dist``, the mean cosine
    distance in [0, 2]) and the discriminator's (:func:`rtd_scalars`)."""
    out = []
    if "slots_dropped" in summed:
        updates = summed.get("updates", 0) or 1
        out.append(Scalar("slots_dropped", summed["slots_dropped"] / updates, updates, 1))
    for s in registry.statistics():
        if s.total in summed:
            per = summed.get(s.per, 0)
            out.append(Scalar(s.name, summed[s.total] / per if per else 0.0, per, s.decimals))
    return out + rtd_scalars(summed)


def perplexity(bits: float) -> float:
    """2 ** ``bits`` to 2 decimals, as fairseq's ``ppl`` (inf past float range)."""
    try:
        return round(2**bits, 2)
    except OverflowError:
        return float("inf")


def counts_of(summed: Dict[str, float]) -> Counts:
    """The :class:`Counts` in summed logging outputs (their ``fn_*`` keys)."""
    c = Counts(**{n: summed[f"fn_{n}"] for n in SUMMED if f"fn_{n}" in summed})
    c.with_synonyms, c.with_content = "fn_synonym" in summed, "fn_content" in summed
    return c


def logged_values(summed: Dict[str, float]) -> Dict[str, float]:
    """Every value the criterions log for these sums, under its logged name, rounded as logged,
    in the order of fairseq's log line (an empty dict when nothing was masked)."""
    n = summed.get("sample_size", 0)
    if n == 0:
        return {}
    out = {s.name: round(s.value, s.decimals) for s in loss_scalars(summed)}
    with_fn = "fn_masked" in summed
    if with_fn:
        out["nseq"] = float(summed.get("fn_sequences", 0))
        out["special_masked"] = float(summed.get("fn_special_masked", 0))
    out.update({s.name: round(s.value, s.decimals) for s in step_scalars(summed)})
    if "mlm_loss" in summed:
        out["ppl"] = perplexity(summed["mlm_loss"] / n / math.log(2))
    if with_fn:
        report = derive(counts_of(summed))
        for key, decimals in LOGGED:
            value = getattr(report, key)
            if value is not None:
                out[key] = round(value, decimals)
    return out
