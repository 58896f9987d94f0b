"""The logged statistics of the HF path: the steps' sums (:class:`~truneg_fairseq.core.sums.StatSums`)
reduced by :func:`truneg_fairseq.core.statistics.logged_values`, the one definition the fairseq
criterions log through fairseq's meters too: the same definitions and rounding (``loss`` and its
terms in bits per masked token, ``ppl``, ``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``,
``iter_corr_ratio``, ``content_pred``, ``nseq``, ``sr_dist``, ``disc_bce``, ``disc_acc``,
``replaced``, ``rtd_precision``, ``rtd_recall``, ``rtd_synonym``, ...), each a ratio of the
interval's sums.

In the logs of ``transformers`` (:func:`interval_values`) the losses follow transformers: ``loss``,
``eval_loss`` and ``train_loss`` are nats per masked token (``perplexity = exp(eval_loss)`` holds),
and each value kept in fairseq's bits says so in its name: ``loss_bits``, ``mlm_loss_bits``,
``corrected_loss_bits``, ``sr_loss_bits``, ``kl_loss_bits``, ``disc_loss_bits``.
"""

from __future__ import annotations

from typing import Dict, Optional

from truneg_fairseq.core.objectives import term_names
from truneg_fairseq.core.statistics import logged_values
from truneg_fairseq.core.sums import StatSums


def reduce(summed: Dict[str, float]) -> Dict[str, float]:
    """The values the fairseq criterion logs for these summed logging outputs, under its names."""
    out = logged_values(summed)
    if not summed.get("slots_dropped"):
        out.pop("slots_dropped", None)  # logged when something was dropped
    return out


def interval_values(
    sums: StatSums, prefix: Optional[str] = None, with_loss: bool = False
) -> Dict[str, float]:
    """Pop ``sums`` and reduce them under the HF log names (bits as ``NAME_bits``); with
    ``with_loss``, ``loss`` too: nats per masked token over the interval (an evaluation's
    ``eval_loss``; in training logs ``loss`` is ``Trainer``'s own). Keys prefixed with
    ``prefix_`` when given."""
    summed = sums.pop()
    bits = ("loss", *term_names())  # the values logged_values gives in bits per masked token
    values = {f"{k}_bits" if k in bits else k: v for k, v in reduce(summed).items()}
    n = summed.get("sample_size", 0)
    if with_loss and n:
        values = {"loss": float(summed["loss"]) / n, **values}
    return {f"{prefix}_{k}" if prefix else k: v for k, v in values.items()}
