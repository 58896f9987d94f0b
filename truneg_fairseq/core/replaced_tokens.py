"""ELECTRA's part of a step: the generator's replacements and the replaced-token-detection term.
torch only.

The model pass (inside the model's one ``forward``) samples a replacement at every prediction
slot from the generator's logits (:func:`sample_replacements`), writes them into the masked input
(:func:`corrupt`) and runs the discriminator on the result. The step then labels every token
replaced/original and sums the per-token BCE (:func:`rtd_term`), and weights it against the
generator's masked-LM terms (:func:`add_rtd_terms`):

    loss = gen_weight * L_mlm + disc_weight * mask_prob * sum_t BCE_t

Dividing by the number of masked tokens, ``mask_prob * sum_t`` becomes (in expectation) the
per-token mean BCE that ELECTRA weights by 50; it is logged as ``disc_loss`` (in the loss's
unit), and the plain per-token mean as ``disc_bce``.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

import torch

from truneg_fairseq.core import losses
from truneg_fairseq.core.model_outputs import MaskedLMOutputs
from truneg_fairseq.core.objectives.electra_rtd import RTD_POLICIES  # noqa: F401  (re-exported)


class RTDSettings(NamedTuple):
    """The discriminator term's settings: the weights of the generator's MLM terms and of the
    discriminator's term, the masking rate (it scales the per-token sum), and the label of a
    sampled synonym of the original word (``replaced`` as ELECTRA, ``original``, ``ignore``)."""

    gen_weight: float
    disc_weight: float
    mask_prob: float
    synonym_policy: str = "replaced"


@torch.no_grad()
def sample_replacements(logits: torch.Tensor, temperature: float, pad: int) -> torch.Tensor:
    """S x V generator logits -> S ids sampled from softmax(logits / temperature), as
    argmax(logits + Gumbel noise); no gradient; never the padding id (the discriminator would
    read a sampled pad as padding in a padded batch and as a token in an unpadded one)."""
    scaled = logits.detach().float() / temperature  # S x V
    # the noise built in place in one S x V buffer: the largest tensor of the step, and fewer
    # temporaries make it ~40% faster on a CPU
    noise = torch.rand_like(scaled).clamp_(1e-9, 1.0 - 1e-9)
    noise.log_().neg_().log_().neg_().add_(scaled)
    noise[:, pad] = float("-inf")
    return noise.argmax(dim=-1)  # S


def corrupt(
    sel, src_tokens: torch.Tensor, sampled: torch.Tensor, valid: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(S sampled ids, B x T discriminator input): the samples written at the selected
    positions; a slot with nothing to predict (``valid`` False) keeps its input token."""
    sampled = torch.where(valid, sampled, sel.take(src_tokens))  # S
    return sampled, sel.put(src_tokens, sampled)  # S, B x T


def rtd_term(
    net: MaskedLMOutputs,
    original: torch.Tensor,
    padding_idx: int,
    synonym_sample: Optional[torch.Tensor],
    policy: str,
) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Score the discriminator of the model's pass.

    net: the model's outputs (``rtd_corrupted``, ``rtd_logits``: B x T); original: B x T (the
    gold token at the masked positions); synonym_sample: B x T bool, True where the sampled
    replacement is a synonym of the original token (None without a synonym table); policy: the
    label of such a replacement. Returns (sum of per-token BCE, summable logged counts).
    """
    corrupted, disc_logits = net.rtd_corrupted, net.rtd_logits  # B x T each
    nonpad = original.ne(padding_idx)  # B x T
    syn = synonym_sample if synonym_sample is not None else torch.zeros_like(nonpad)
    labels, weights, replaced = losses.rtd_targets(original, corrupted, nonpad, syn, policy)
    bce = losses.rtd_loss(disc_logits, labels, weights)  # B x T
    predicted = disc_logits.detach().gt(0) & nonpad  # B x T
    counted = weights.gt(0)
    is_pos = labels.gt(0.5) & counted
    stats = {
        "disc_bce_sum": bce.sum(),
        "disc_tokens": counted.sum(),
        "disc_correct": (predicted.eq(is_pos) & counted).sum(),
        "rtd_replaced": replaced.sum(),
        "rtd_true_pos": (predicted & is_pos).sum(),
        "rtd_pred_pos": (predicted & counted).sum(),
        "rtd_pos": is_pos.sum(),
    }
    if synonym_sample is not None:
        stats["rtd_synonym"] = (syn & replaced).sum()
    return bce.sum(), stats


def add_rtd_terms(
    terms: List,
    stats: Dict[str, torch.Tensor],
    net: MaskedLMOutputs,
    sel,
    original: torch.Tensor,
    gold: torch.Tensor,
    valid: torch.Tensor,
    whole: Optional[torch.Tensor],
    lookup,
    pad: int,
    rtd: RTDSettings,
) -> List:
    """The step's terms with the generator's weighted by ``rtd.gen_weight`` and the
    discriminator's added; its counts go into ``stats``. ``whole`` (S bool): the gold entry ends
    its word; ``lookup``: the synonym lookup, or None (then no sample is a synonym)."""
    syn_sample = None
    if lookup is not None:
        syn_sample = sel.put(
            torch.zeros_like(original, dtype=torch.bool),
            valid & whole & lookup.is_synonym(gold, net.rtd_sampled),
        )  # B x T
    rtd_sum, rtd_stats = rtd_term(net, original, pad, syn_sample, rtd.synonym_policy)
    terms = [(name, rtd.gen_weight * w, value) for name, w, value in terms]
    # mask_prob x the sum over all tokens = (in expectation) the per-token mean per masked token
    terms.append(("disc_loss", rtd.disc_weight, rtd.mask_prob * rtd_sum))
    stats.update(rtd_stats)
    return terms
