"""ELECTRA's replaced-token-detection (RTD) term, its configuration and its metrics.

Any masked-LM criterion of the plugin adds this term when the model's class detects replaced
tokens (:class:`truneg_fairseq.models.objectives.ReplacedTokenDetection`). The model's forward
samples the replacements from the generator, builds the corrupted input and runs the
discriminator (keys ``rtd_sampled``, ``rtd_corrupted``, ``rtd_logits``); here every token is
labelled replaced/original and the per-token BCE is summed. The criterion combines it as

    loss = electra_gen_weight * L_mlm + electra_disc_weight * mask_prob * sum_t BCE_t

Dividing by the number of masked tokens (fairseq's ``sample_size``), ``mask_prob * sum_t``
becomes (in expectation) the per-token mean BCE that ELECTRA weights by 50; it is logged as
``disc_loss`` (in the loss's unit), and the plain per-token mean as ``disc_bce``.
"""

from dataclasses import dataclass, field, fields
from typing import Dict, Optional, Tuple

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.logging import metrics
from omegaconf import II

from truneg_fairseq.criterions import logs, losses

RTD_POLICIES = ChoiceEnum(["replaced", "original", "ignore"])


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


# flags that only mean something when the model has a discriminator, with their defaults
ELECTRA_ONLY = {
    f.name: f.default for f in fields(ReplacedTokenDetectionConfig) if f.name.startswith("electra_")
}


def changed_electra_flags(cfg) -> list:
    """The ELECTRA-only flags set to something other than their default, as on the command line."""
    return [
        "--" + name.replace("_", "-")
        for name, default in ELECTRA_ONLY.items()
        if getattr(cfg, name) != default
    ]


def rtd_term(
    net: Dict[str, torch.Tensor],
    original: torch.Tensor,
    padding_idx: int,
    synonym_sample: Optional[torch.Tensor],
    policy: str,
) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Score the discriminator of the model's pass.

    net: the model's outputs (``rtd_corrupted``, ``rtd_logits``: B x T); original: B x T (the
    gold token at the masked positions); synonym_sample: B x T bool, True where the sampled
    replacement is a synonym of the original token (None without a synonym table); policy:
    ``--electra-rtd-synonym-policy``. Returns (sum of per-token BCE, summable logged counts).
    """
    corrupted, disc_logits = net["rtd_corrupted"], net["rtd_logits"]  # B x T each
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


def reduce_rtd_metrics(logging_outputs) -> None:
    """Log the discriminator's metrics (no-op when no worker ran the RTD term)."""
    if not any("disc_tokens" in log for log in logging_outputs):
        return

    def total(key):
        return logs.total(logging_outputs, key)

    n_disc = total("disc_tokens")
    n_rep = total("rtd_replaced")
    metrics.log_scalar(
        "disc_bce", total("disc_bce_sum") / max(n_disc, 1), n_disc, round=4
    )  # nats per token
    metrics.log_scalar("disc_acc", 100.0 * total("disc_correct") / max(n_disc, 1), n_disc, round=2)
    metrics.log_scalar("replaced", 100.0 * n_rep / max(n_disc, 1), n_disc, round=2)
    pred_pos, pos = total("rtd_pred_pos"), total("rtd_pos")
    metrics.log_scalar(
        "rtd_precision", 100.0 * total("rtd_true_pos") / max(pred_pos, 1), pred_pos, round=2
    )
    metrics.log_scalar("rtd_recall", 100.0 * total("rtd_true_pos") / max(pos, 1), pos, round=2)
    if any("rtd_synonym" in log for log in logging_outputs):
        metrics.log_scalar(
            "rtd_synonym", 100.0 * total("rtd_synonym") / max(n_rep, 1), n_rep, round=3
        )
