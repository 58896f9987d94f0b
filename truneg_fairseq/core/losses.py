"""Loss math of the counter-false-negative objectives, as plain functions on tensors.

Notation: M masked positions in a batch, V vocabulary entries, C embedding or hidden size.
Every function returns per-position terms; criterions sum them (``reduction="sum"``) and fairseq
divides by the summed ``sample_size``, which keeps the losses exact under data-parallel sharding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def masked_nll(logits: torch.Tensor, targets: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """Eq. 1 per position: -log p(w_k | s).

    logits: M x V (any float dtype; computed in fp32), targets: M. Returns M fp32 values, 0 where
    ``targets == padding_idx``.
    """
    return F.cross_entropy(logits.float(), targets, reduction="none", ignore_index=padding_idx)  # M


def corrected_nll(nll: torch.Tensor, corrected: torch.Tensor) -> torch.Tensor:
    """Eq. 2 as what it removes from Eq. 1: the NLL of the positions whose prediction is a
    synonym of the gold token, so ``L_hc = sum(nll) - sum(corrected_nll)``; those positions get
    exactly no gradient. nll: M fp32, corrected: M bool -> M fp32."""
    return nll * corrected.to(nll.dtype)


def soft_regularization(e_gold: torch.Tensor, e_pred: torch.Tensor) -> torch.Tensor:
    """Eq. 3 per position: 1 - cos(e_gold, e_pred), in [0, 2].

    e_gold, e_pred: M x C rows of the model's input embedding matrix for the gold and the
    predicted tokens (both receive gradient). Returns M fp32 values.
    """
    return 1.0 - F.cosine_similarity(e_gold.float(), e_pred.float(), dim=-1, eps=1e-8)  # M


def sentence_kl(h_p: torch.Tensor, h_s: torch.Tensor) -> torch.Tensor:
    """KL(softmax(H_p) || softmax(H_s)) per token, softmax over the hidden dimension.

    h_p, h_s: B x T x C encoder outputs for the prediction-filled and the original sentence.
    Returns B x T fp32 values (>= 0; 0 iff the two rows give the same distribution).
    """
    logp = F.log_softmax(h_p.float(), dim=-1)  # B x T x C
    logs = F.log_softmax(h_s.float(), dim=-1)  # B x T x C
    return (logp.exp() * (logp - logs)).sum(-1)  # B x T


def rtd_targets(
    original: torch.Tensor,
    corrupted: torch.Tensor,
    nonpad: torch.Tensor,
    synonym_sample: torch.Tensor,
    policy: str = "replaced",
):
    """Labels and weights of ELECTRA's replaced-token detection.

    original, corrupted: B x T ids (a sample equal to the original counts as original);
    nonpad: B x T bool; synonym_sample: B x T bool, True where the sampled replacement is a
    synonym of the original token. ``policy`` for those: ``replaced`` (label 1, ELECTRA),
    ``original`` (label 0) or ``ignore`` (weight 0). Returns (labels, weights, replaced), the
    first two B x T float, the last B x T bool.
    """
    replaced = corrupted.ne(original) & nonpad  # B x T
    labels = replaced.float()
    weights = nonpad.float()
    syn = synonym_sample & replaced
    if policy == "original":
        labels = labels.masked_fill(syn, 0.0)
    elif policy == "ignore":
        weights = weights.masked_fill(syn, 0.0)
    elif policy != "replaced":
        raise ValueError(f"unknown --electra-rtd-synonym-policy {policy!r}")
    return labels, weights, replaced


def rtd_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Per-token binary cross-entropy of the discriminator, B x T fp32 (0 where weight 0)."""
    return F.binary_cross_entropy_with_logits(logits.float(), labels, reduction="none") * weights
