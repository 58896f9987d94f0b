"""Evaluate a masked-LM checkpoint: MLM loss, accuracy and the correction statistics.

Works for any fairseq ``masked_lm`` checkpoint (a plain ``masked_lm`` baseline included), so the
statistics of the paper's Table 2 can be compared across criterions on the same masked data: the
masking is seeded, so every checkpoint sees identical masks.
"""

import logging
from typing import Dict, Optional

import torch
from fairseq import checkpoint_utils, utils
from fairseq.logging import metrics

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig

logger = logging.getLogger(__name__)


@torch.no_grad()
def evaluate_mlm(
    checkpoint: str, data: str, synonym_table: Optional[str] = None, subset: str = "valid",
    batch_size: int = 32, max_batches: int = 0, seed: int = 1,
) -> Dict[str, float]:
    """Returns {"mlm_loss" (bits/token), "ppl", "mlm_acc" (%), "pred_corr_ratio" (%),
    "iter_corr_ratio" (%), "masked_tokens", "sentences"}."""
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data, "seed": seed}
    )
    model = models[0].eval()
    crit = CounterFalseNegativeLoss(SynonymCriterionConfig(synonym_table=synonym_table), task)
    task.load_dataset(subset, combine=False, epoch=1)
    itr = task.get_batch_iterator(
        dataset=task.dataset(subset), max_sentences=batch_size, seed=seed, num_workers=0,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
    ).next_epoch_itr(shuffle=False)
    logs = []
    for i, sample in enumerate(itr):
        if max_batches and i >= max_batches:
            break
        _, _, log = crit(model, sample)
        logs.append(log)
    with metrics.aggregate(new_root=True) as agg:
        crit.reduce_metrics(logs)
        out = dict(agg.get_smoothed_values())
    out["masked_tokens"] = int(sum(int(l["sample_size"]) for l in logs))
    out["sentences"] = int(sum(int(l["nsentences"]) for l in logs))
    return out
