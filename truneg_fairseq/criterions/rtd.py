"""ELECTRA's replaced-token-detection (RTD) term, its configuration and its metrics.

Any masked-LM criterion of the plugin adds this term when the model has a discriminator
(``mlm_access(model).has_discriminator``): replacements are sampled from the generator at the
masked positions, the discriminator labels every token replaced/original, and the per-token BCE
is summed. The criterion combines it as

    loss = electra_gen_weight * L_mlm + electra_disc_weight * mask_prob * sum_t BCE_t

Dividing by the number of masked tokens (fairseq's ``sample_size``), ``mask_prob * sum_t``
becomes (in expectation) the per-token mean BCE that ELECTRA weights by 50.
"""

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch
from fairseq import utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.logging import metrics
from omegaconf import II

from truneg_fairseq.criterions import losses

RTD_POLICIES = ChoiceEnum(["replaced", "original", "ignore"])

# flags that only mean something when the model has a discriminator: flag -> default
ELECTRA_ONLY = {
    "electra_gen_weight": 1.0,
    "electra_disc_weight": 50.0,
    "electra_rtd_synonym_policy": "replaced",
}


@dataclass
class ReplacedTokenDetectionConfig(FairseqDataclass):
    electra_gen_weight: float = field(
        default=1.0, metadata={"help": "ELECTRA only: weight of the generator MLM term"}
    )
    electra_disc_weight: float = field(
        default=50.0,
        metadata={"help": "ELECTRA only: weight of the replaced-token-detection term (per token)"},
    )
    electra_rtd_synonym_policy: RTD_POLICIES = field(
        default="replaced",
        metadata={
            "help": "ELECTRA only: label for a sampled replacement that is a WordNet synonym of the "
            "original token: replaced (ELECTRA), original, or ignore (no loss); needs --synonym-table"
        },
    )
    # the task's masking rate (the same --mask-prob flag; None for tasks without one): scales the
    # RTD sum to a per-token mean
    mask_prob: Optional[float] = II("oc.select:task.mask_prob,null")


def changed_electra_flags(cfg) -> list:
    """The ELECTRA-only flags set to something other than their default, as on the command line."""
    return [
        "--" + name.replace("_", "-")
        for name, default in ELECTRA_ONLY.items()
        if getattr(cfg, name) != default
    ]


def rtd_term(
    access, cfg: ReplacedTokenDetectionConfig, lookup, src_tokens: torch.Tensor,
    original: torch.Tensor, sel, gen_logits: torch.Tensor, gold: torch.Tensor,
    valid: torch.Tensor, whole: Optional[torch.Tensor], padding_idx: int,
) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Sample replacements, build the corrupted input, and score the discriminator.

    src_tokens, original: B x T (``original`` has the gold token at the masked positions);
    sel: the selected positions (:mod:`.selection`), S of them; gen_logits: S x V; gold, valid:
    S; whole: S bool (the gold token is a whole word) or None without a synonym table. Returns
    (sum of per-token BCE, summable logged counts).
    """
    sampled = access.sample_replacements(gen_logits)  # S, no gradient
    sampled = torch.where(valid, sampled, sel.take(src_tokens))  # S (padding targets keep their token)
    corrupted = sel.put(src_tokens, sampled)  # B x T
    nonpad = original.ne(padding_idx)  # B x T
    disc_logits = access.discriminator_logits(corrupted)  # B x T
    syn_sample = torch.zeros_like(nonpad)  # B x T
    if lookup is not None:
        syn_sample = sel.put(syn_sample, valid & whole & lookup.is_synonym(gold, sampled))
    labels, weights, replaced = losses.rtd_targets(
        original, corrupted, nonpad, syn_sample, cfg.electra_rtd_synonym_policy
    )
    rtd = losses.rtd_loss(disc_logits, labels, weights)  # B x T
    predicted = disc_logits.detach().gt(0) & nonpad  # B x T
    counted = weights.gt(0)
    is_pos = labels.gt(0.5) & counted
    terms = {
        "disc_loss": rtd.sum(),
        "disc_tokens": counted.sum(),
        "disc_correct": (predicted.eq(is_pos) & counted).sum(),
        "rtd_replaced": replaced.sum(),
        "rtd_true_pos": (predicted & is_pos).sum(),
        "rtd_pred_pos": (predicted & counted).sum(),
        "rtd_pos": is_pos.sum(),
    }
    if lookup is not None:
        terms["rtd_synonym"] = (syn_sample & replaced).sum()
    return rtd.sum(), terms


def reduce_rtd_metrics(logging_outputs) -> None:
    """Log the discriminator's metrics (no-op when no worker ran the RTD term)."""
    if not any("disc_loss" in log for log in logging_outputs):
        return

    def total(key):
        return utils.item(sum(log.get(key, 0) for log in logging_outputs))

    n_disc = total("disc_tokens")
    n_rep = total("rtd_replaced")
    metrics.log_scalar("disc_loss", total("disc_loss") / max(n_disc, 1), n_disc, round=4)
    metrics.log_scalar("disc_acc", 100.0 * total("disc_correct") / max(n_disc, 1), n_disc, round=2)
    metrics.log_scalar("replaced", 100.0 * n_rep / max(n_disc, 1), n_disc, round=2)
    pred_pos, pos = total("rtd_pred_pos"), total("rtd_pos")
    metrics.log_scalar("rtd_precision", 100.0 * total("rtd_true_pos") / max(pred_pos, 1), pred_pos, round=2)
    metrics.log_scalar("rtd_recall", 100.0 * total("rtd_true_pos") / max(pos, 1), pos, round=2)
    if any("rtd_synonym" in log for log in logging_outputs):
        metrics.log_scalar("rtd_synonym", 100.0 * total("rtd_synonym") / max(n_rep, 1), n_rep, round=3)
