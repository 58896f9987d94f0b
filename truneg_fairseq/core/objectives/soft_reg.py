"""``soft_reg`` (``--criterion mlm_soft_reg``): Eq. 1 + lambda x Eq. 3, the cosine distance
between the input embeddings of the gold and the predicted token."""

from truneg_fairseq.core.objectives.registry import (
    Objective,
    Param,
    Statistic,
    register_objective,
)


@register_objective
class SoftReg(Objective):
    """Adds ``sr_weight`` x sum_k (1 - cos(e_k, e'_k)) over the masked positions, e and e' the
    input-embedding rows of the gold token and of the argmax prediction (both get gradient; the
    argmax does not). A synonym table is optional and only adds the statistics. Logged:
    ``mlm_loss`` and ``sr_loss``, ``loss = mlm_loss + sr_weight x sr_loss``; ``sr_dist`` is the
    mean distance itself, in [0, 2]."""

    name = "soft_reg"
    criterion = "mlm_soft_reg"
    outputs = ("embeddings",)
    params = (
        Param(
            "sr_weight",
            1.0,
            "lambda: weight of the soft-regularization term 1 - cos(e_gold, e_pred)",
        ),
    )
    logged_terms = ("sr_loss",)
    statistics = (Statistic("sr_dist", "sr_dist_sum"),)

    def loss_terms(self, step):
        from truneg_fairseq.core import losses

        sr = losses.soft_regularization(step.net.gold_embed, step.net.pred_embed)  # S
        sr_sum = (sr * step.valid.float()).sum()
        return [("sr_loss", self.sr_weight, sr_sum)], {"sr_dist_sum": sr_sum}
