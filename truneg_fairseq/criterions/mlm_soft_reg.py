"""``--criterion mlm_soft_reg``: Eq. 1 + lambda * Eq. 3 (embedding cosine distance)."""

from dataclasses import dataclass, field

from fairseq.criterions import register_criterion

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig


@dataclass
class SoftRegConfig(SynonymCriterionConfig):
    synonym_sr_weight: float = field(
        default=1.0,
        metadata={"help": "lambda: weight of the soft-regularization term 1 - cos(e_gold, e_pred)"},
    )


@register_criterion("mlm_soft_reg", dataclass=SoftRegConfig)
class SoftRegLoss(CounterFalseNegativeLoss):
    """Adds (1/N_m) sum_k (1 - cos(e_k, e'_k)) over the masked positions, e and e' the input
    embedding rows of the gold token and of the argmax prediction. Both rows receive gradient;
    the prediction itself (an argmax) does not. A synonym table is optional and only adds the
    correction statistics to the log. Logged terms: ``mlm_loss`` and ``sr_loss`` (the cosine
    distances summed and, like every term, per masked token in bits): ``loss = mlm_loss +
    --synonym-sr-weight x sr_loss``; ``sr_dist`` is the mean distance itself, in [0, 2]."""

    _registered_name = "mlm_soft_reg"
    objective = "soft_reg"
    weight_field = "synonym_sr_weight"
    model_outputs = ("embeddings",)
