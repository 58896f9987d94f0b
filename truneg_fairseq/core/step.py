"""One masked-LM step, written once for every front end: from the model pass's outputs to the
loss and the logged sums. torch only.

A front end (a fairseq criterion, the HF objective) runs its model once, in the model's own
``forward``, and gets its :class:`~truneg_fairseq.core.model_outputs.MaskedLMOutputs`
(``mlm_logits`` S x V, ``mlm_pred`` S, and what the objective asks for); :func:`masked_lm_step` turns it into the loss
and the step's summable statistics. What happens inside the model pass that every front end
shares is here too: the prediction-filled sentence and the sentence-KL encodings given an
``encode`` callable (:func:`prediction_filled`, :func:`sentence_kl_encodings`).

The objectives are the entries of :mod:`truneg_fairseq.core.objectives` (``mlm``,
``hard_correction``, ``soft_reg``, ``sent_kl``, ``electra`` and any registered later): each adds
its terms to the masked-LM term (Eq. 1) and declares the model outputs they read.

With a discriminator (ELECTRA: ``rtd_*`` keys and :class:`~truneg_fairseq.core.replaced_tokens.RTDSettings`)
the replaced-token-detection term is added (:mod:`truneg_fairseq.core.replaced_tokens`). Every term is a
sum over the batch (``reduction="sum"``); the front end divides by the masked tokens of the whole
update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import torch

from truneg_fairseq.core import losses
from truneg_fairseq.core import statistics as st
from truneg_fairseq.core.model_outputs import MaskedLMOutputs
from truneg_fairseq.core.objectives.registry import MLM_TERM, Objective
from truneg_fairseq.core.replaced_tokens import RTDSettings, add_rtd_terms

# a loss term: (logged name, weight, summed value); the loss is sum(weight * value)
Term = Tuple[str, float, torch.Tensor]


@dataclass
class MaskedLMStep:
    """One step's tensors. S is the number of selected positions (M masked positions, or B * N
    static slots)."""

    net: MaskedLMOutputs  # the model pass's outputs (core/model_outputs.py)
    sel: object  # the selection (core/selection.py)
    src_tokens: torch.Tensor  # B x T masked input
    target: torch.Tensor  # B x T gold ids at the masked positions, padding elsewhere
    gold: torch.Tensor  # S gold ids (padding: a slot with nothing to predict)
    valid: torch.Tensor  # S bool: gold is not padding
    nll: torch.Tensor  # S fp32 -log p(gold), 0 where not valid
    synonym: torch.Tensor  # S bool: the argmax is a WordNet synonym of a whole-word gold token
    nonpad: Optional[torch.Tensor] = None  # B x T bool: the sentence's tokens
    original: Optional[torch.Tensor] = None  # B x T: the input with the gold tokens unmasked
    lookup: object = None  # the synonym lookup (core/lookup.py), None without a table
    whole: Optional[torch.Tensor] = None  # S bool: the gold entry ends its word (with a table)
    pad: int = 1  # the padding id


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
def masked_lm_step(
    net: MaskedLMOutputs,
    sel,
    src_tokens: torch.Tensor,
    target: torch.Tensor,
    pad: int,
    objective: Objective,
    *,
    lookup=None,
    words: Callable[[torch.Tensor], torch.Tensor],
    nonpad: torch.Tensor,
    ntokens,
    nsentences,
    dropped: Optional[torch.Tensor] = None,
    rtd: Optional[RTDSettings] = None,
) -> StepResult:
    """The loss and the logged sums of one step.

    net: the model pass's outputs; sel: its selection; objective: an
    :class:`~truneg_fairseq.core.objectives.Objective` instance (its parameters' values);
    src_tokens, target: B x T (the masked input; the gold ids at the masked positions, ``pad`` elsewhere); lookup: the synonym lookup
    (:class:`~truneg_fairseq.core.lookup.SynonymLookup`) or None; words: S gold ids -> S bool,
    the ordinary entries (not specials, not the mask) whose masked positions are counted as words;
    nonpad: B x T; ntokens, nsentences: logged as given; dropped: masked positions beyond the
    static slots (logged as ``slots_dropped`` when given); rtd: the discriminator's settings, for
    a pass with a discriminator."""
    gold = sel.take(target)  # S
    valid = gold.ne(pad)  # S
    sample_size = valid.sum()
    nll = losses.masked_nll(net.mlm_logits, gold, pad)  # S
    pred = net.mlm_pred  # S
    original = torch.where(target.ne(pad), target, src_tokens)  # B x T
    whole = None
    if lookup is not None:
        whole = sel.take(lookup.ends_word(original))  # S: subword pieces are never corrected
        synonym = valid & st.synonym_predictions(gold, pred, lookup.is_synonym(gold, pred), whole)
    else:
        synonym = torch.zeros_like(valid)
    step = MaskedLMStep(
        net,
        sel,
        src_tokens,
        target,
        gold,
        valid,
        nll,
        synonym,
        nonpad,
        original,
        lookup,
        whole,
        pad,
    )
    own, stats = objective.loss_terms(step)
    terms = [(MLM_TERM, 1.0, nll.sum()), *own]
    stats = dict(stats)
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
