"""One masked-LM step, written once for every front end: from the model pass's outputs to the
loss and the logged sums. torch only.

A front end (a fairseq criterion, the HF objective) runs its model once, in the model's own
``forward``, and gets the dict of :mod:`truneg_fairseq.models.objectives` (``mlm_logits`` S x V,
``mlm_pred`` S, and what the objective asks for); :func:`masked_lm_step` turns it into the loss
and the step's summable statistics. What happens inside the model pass that every front end
shares is here too: the prediction-filled sentence and the sentence-KL encodings given an
``encode`` callable (:func:`prediction_filled`, :func:`sentence_kl_encodings`).

The objectives (``objective``):

* ``mlm``: Eq. 1, plain masked-LM (a synonym table, if given, only adds the statistics);
* ``hard_correction``: Eq. 2, positions whose argmax is a synonym of the gold word (a whole word,
  never a piece) are left out of the loss: ``loss = mlm_loss - corrected_loss``;
* ``soft_reg``: Eq. 1 + ``weight`` x sum (1 - cos(e_gold, e_pred)) over the input-embedding rows of
  the gold and predicted tokens (``gold_embed``, ``pred_embed``);
* ``sent_kl``: Eq. 1 + ``weight`` x sum over non-pad tokens of KL(softmax(H_p) || softmax(H_s)),
  H_p the encoding of the sentence with its masks filled by the predictions and H_s of the
  original sentence (``kl_h_p``, ``kl_h_s``).

With a discriminator (ELECTRA: ``rtd_*`` keys and :class:`~truneg_fairseq.core.replaced_tokens.RTDSettings`)
the replaced-token-detection term is added (:mod:`truneg_fairseq.core.replaced_tokens`). Every term is a
sum over the batch (``reduction="sum"``); the front end divides by the masked tokens of the whole
update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import torch

from truneg_fairseq.core import losses
from truneg_fairseq.core import statistics as st
from truneg_fairseq.core.replaced_tokens import RTDSettings, add_rtd_terms

OBJECTIVES = ("mlm", "hard_correction", "soft_reg", "sent_kl")

# a loss term: (logged name, weight, summed value); the loss is sum(weight * value)
Term = Tuple[str, float, torch.Tensor]


@dataclass
class MaskedLMStep:
    """One step's tensors. S is the number of selected positions (M masked positions, or B * N
    static slots)."""

    net: Dict[str, torch.Tensor]  # the model's outputs (models/objectives.py)
    sel: object  # the selection (core/selection.py)
    src_tokens: torch.Tensor  # B x T masked input
    target: torch.Tensor  # B x T gold ids at the masked positions, padding elsewhere
    gold: torch.Tensor  # S gold ids (padding: a slot with nothing to predict)
    valid: torch.Tensor  # S bool: gold is not padding
    nll: torch.Tensor  # S fp32 -log p(gold), 0 where not valid
    synonym: torch.Tensor  # S bool: the argmax is a WordNet synonym of a whole-word gold token


class StepResult(NamedTuple):
    loss: torch.Tensor  # the summed loss (what is differentiated)
    sample_size: torch.Tensor  # masked positions in the loss
    logging: Dict[str, torch.Tensor]  # summable values under their logged names
    step: MaskedLMStep


# ---- inside the model pass ---------------------------------------------------------------
def sentence_kl_pass(
    encode: Callable[[torch.Tensor], torch.Tensor],
    sel,
    src_tokens: torch.Tensor,
    target: torch.Tensor,
    pred: torch.Tensor,
    valid: torch.Tensor,
    pad: int,
    grad_original: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(H_p, H_s), each B x T x C: ``encode`` (B' x T tokens -> B' x T x C) of s_p, the sentence
    with its masks filled by the predictions ``pred`` (S; ``valid`` S bool: the slot has a gold
    token), and of s, the original sentence (masks filled by the gold tokens of ``target``).

    H_s is a fixed target, encoded under ``no_grad`` with no graph kept, unless
    ``grad_original``; when both sides need gradient, and without gradient (validation), the two
    run as one batch of 2B rows (batching a fixed target with s_p would make the backward pay for
    rows that get no gradient: ~20% more step time)."""
    s = torch.where(target.ne(pad), target, src_tokens)  # B x T: masks -> gold tokens
    s_p = sel.put(s, torch.where(valid, pred, sel.take(s)))  # B x T: masks -> predictions
    if grad_original or not torch.is_grad_enabled():
        h = encode(torch.cat([s_p, s], dim=0))  # 2B x T x C
        return h[: s.size(0)], h[s.size(0) :]
    h_p = encode(s_p)  # B x T x C
    with torch.no_grad():
        h_s = encode(s)  # B x T x C
    return h_p, h_s


# ---- the loss ----------------------------------------------------------------------------
def objective_terms(
    objective: str, step: MaskedLMStep, nonpad: torch.Tensor, weight: float = 1.0
) -> Tuple[List[Term], Dict[str, torch.Tensor]]:
    """The objective's loss as named, weighted sums and the summable statistics it logs besides.
    ``nonpad``: B x T, the tokens the sentence-KL term sums over; ``weight``: the soft
    regularization's or the sentence KL's weight."""
    terms: List[Term] = [("mlm_loss", 1.0, step.nll.sum())]
    stats: Dict[str, torch.Tensor] = {}
    if objective == "hard_correction":
        terms.append(("corrected_loss", -1.0, losses.corrected_nll(step.nll, step.synonym).sum()))
    elif objective == "soft_reg":
        sr = losses.soft_regularization(step.net["gold_embed"], step.net["pred_embed"])  # S
        sr_sum = (sr * step.valid.float()).sum()
        terms.append(("sr_loss", weight, sr_sum))
        stats["sr_dist_sum"] = sr_sum
    elif objective == "sent_kl":
        kl = losses.sentence_kl(step.net["kl_h_p"], step.net["kl_h_s"])  # B x T
        terms.append(("kl_loss", weight, (kl * nonpad.float()).sum()))
    elif objective != "mlm":
        raise ValueError(f"objective {objective!r} is not one of {', '.join(OBJECTIVES)}")
    return terms, stats


def masked_lm_step(
    net: Dict[str, torch.Tensor],
    sel,
    src_tokens: torch.Tensor,
    target: torch.Tensor,
    pad: int,
    objective: str,
    *,
    lookup=None,
    words: Callable[[torch.Tensor], torch.Tensor],
    nonpad: torch.Tensor,
    ntokens,
    nsentences,
    weight: float = 1.0,
    dropped: Optional[torch.Tensor] = None,
    rtd: Optional[RTDSettings] = None,
) -> StepResult:
    """The loss and the logged sums of one step.

    net: the model pass's outputs; sel: its selection; src_tokens, target: B x T (the masked
    input; the gold ids at the masked positions, ``pad`` elsewhere); lookup: the synonym lookup
    (:class:`~truneg_fairseq.core.lookup.SynonymLookup`) or None; words: S gold ids -> S bool,
    the ordinary entries (not specials, not the mask) whose masked positions are counted as words;
    nonpad: B x T; ntokens, nsentences: logged as given; dropped: masked positions beyond the
    static slots (logged as ``slots_dropped`` when given); rtd: the discriminator's settings, for
    a pass with a discriminator."""
    gold = sel.take(target)  # S
    valid = gold.ne(pad)  # S
    sample_size = valid.sum()
    nll = losses.masked_nll(net["mlm_logits"], gold, pad)  # S
    pred = net["mlm_pred"]  # S
    original = torch.where(target.ne(pad), target, src_tokens)  # B x T
    whole = None
    if lookup is not None:
        whole = sel.take(lookup.ends_word(original))  # S: subword pieces are never corrected
        synonym = valid & st.synonym_predictions(gold, pred, lookup.is_synonym(gold, pred), whole)
    else:
        synonym = torch.zeros_like(valid)
    step = MaskedLMStep(net, sel, src_tokens, target, gold, valid, nll, synonym)
    terms, stats = objective_terms(objective, step, nonpad, weight)
    if rtd is not None:
        terms = add_rtd_terms(
            terms, stats, net, sel, original, gold, valid, whole, lookup, pad, rtd
        )
    loss = sum(w * value for _, w, value in terms)

    logging = {
        "loss": loss.data,
        "ntokens": ntokens,
        "nsentences": nsentences,
        "sample_size": sample_size,
    }
    word = valid & words(gold)  # S: masked word positions
    logging.update(
        st.step_counts(
            sel.rows_any,
            word,
            pred.eq(gold),
            valid & ~word,
            target.size(0),
            synonym if lookup is not None else None,
            lookup.content[pred] if lookup is not None and lookup.has_content else None,
        )
    )
    for name, _, value in terms:
        logging[name] = value.data
    if dropped is not None:
        logging["slots_dropped"] = dropped
    for k, v in stats.items():
        logging[k] = v.data if torch.is_tensor(v) else v
    return StepResult(loss, sample_size, logging, step)
