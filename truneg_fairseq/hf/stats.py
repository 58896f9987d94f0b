"""The logged statistics of the HF path: the steps' sums (:class:`~truneg_fairseq.core.sums.StatSums`)
reduced by :func:`truneg_fairseq.core.statistics.logged_values`, the one definition the fairseq
criterions log through fairseq's meters too: the same names, units and rounding (``loss`` and its
terms in bits per masked token, ``ppl``, ``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``,
``iter_corr_ratio``, ``content_pred``, ``nseq``, ``sr_dist``, ``disc_bce``, ``disc_acc``,
``replaced``, ``rtd_precision``, ``rtd_recall``, ``rtd_synonym``, ...), each a ratio of the
interval's sums.
"""

from __future__ import annotations

from typing import Dict, Optional

from truneg_fairseq.core.statistics import logged_values
from truneg_fairseq.core.sums import StatSums


def reduce(summed: Dict[str, float]) -> Dict[str, float]:
    """The values the fairseq criterion logs for these summed logging outputs."""
    out = logged_values(summed)
    if not summed.get("slots_dropped"):
        out.pop("slots_dropped", None)  # logged when something was dropped
    return out


def interval_values(sums: StatSums, prefix: Optional[str] = None) -> Dict[str, float]:
    """Pop ``sums`` and reduce them; keys prefixed with ``prefix_`` when given."""
    values = reduce(sums.pop())
    return {f"{prefix}_{k}" if prefix else k: v for k, v in values.items()}
