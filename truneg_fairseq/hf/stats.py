"""The logged statistics of the HF path: the fairseq criterions' own reduction, on sums.

Each step's ``logging`` dict (:class:`~truneg_fairseq.hf.objective.TrueNegativeMLM`) holds device
tensors under the fairseq criterion's logging-output names. :class:`StatSums` adds them up on the
device (no host sync in the step); at log time the sums of every process are added with one
all-reduce, read with one device-to-host copy, and reduced by the fairseq criterion's
``reduce_metrics`` (``criterions/cfn_base.py``, which calls
:func:`truneg_fairseq.evaluation.false_negatives.log_metrics`): the names, units and definitions
are those of the fairseq logs (``loss`` and its terms in bits per masked token, ``ppl``,
``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``, ``iter_corr_ratio``, ``content_pred``, ``nseq``,
``sr_dist``, ``disc_bce``, ``disc_acc``, ``replaced``, ``rtd_precision``, ``rtd_recall``,
``rtd_synonym``, ...), each a ratio of the interval's sums.
"""

from __future__ import annotations

from typing import Dict, Optional

import torch


def distributed_world() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


class StatSums:
    """Running sums of the steps' ``logging`` dicts (device tensors and Python numbers)."""

    def __init__(self):
        self.sums: Dict[str, object] = {}

    def add(self, logging: Dict) -> None:
        for k, v in logging.items():
            v = v.detach() if torch.is_tensor(v) else v
            self.sums[k] = self.sums[k] + v if k in self.sums else v

    def __bool__(self) -> bool:
        return bool(self.sums)

    def pop(self, all_processes: bool = True) -> Dict[str, float]:
        """The sums as Python floats (over every process when distributed), and reset."""
        sums, self.sums = self.sums, {}
        if not sums:
            return {}
        keys = sorted(sums)
        device = next((v.device for v in sums.values() if torch.is_tensor(v)), torch.device("cpu"))
        vec = torch.stack(
            [torch.as_tensor(sums[k], dtype=torch.float64, device=device) for k in keys]
        )
        if all_processes and distributed_world() > 1:
            import torch.distributed as dist

            dist.all_reduce(vec)
        return dict(zip(keys, vec.tolist()))  # the one device-to-host copy


def reduce(summed: Dict[str, float]) -> Dict[str, float]:
    """The values the fairseq criterion logs for these summed logging outputs."""
    from fairseq.logging import metrics

    from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss

    if not summed.get("sample_size"):
        return {}
    with metrics.aggregate(new_root=True) as agg:
        CounterFalseNegativeLoss.reduce_metrics([summed])
    out = {}
    for k, v in agg.get_smoothed_values().items():
        if k.startswith("_"):
            continue
        out[k] = float(v)
    if not summed.get("slots_dropped"):
        out.pop("slots_dropped", None)  # logged when something was dropped
    return out


def interval_values(sums: StatSums, prefix: Optional[str] = None) -> Dict[str, float]:
    """Pop ``sums`` and reduce them; keys prefixed with ``prefix_`` when given."""
    values = reduce(sums.pop())
    return {f"{prefix}_{k}" if prefix else k: v for k, v in values.items()}
