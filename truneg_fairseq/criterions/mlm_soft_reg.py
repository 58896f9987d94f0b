"""``--criterion mlm_soft_reg``: Eq. 1 + lambda * Eq. 3 (embedding cosine distance)."""

from dataclasses import dataclass, field

from fairseq.criterions import register_criterion

from truneg_fairseq.criterions import losses
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
    correction statistics to the log. Logged: ``sr_loss`` (mean cosine distance)."""

    _registered_name = "mlm_soft_reg"

    def objective(self, access, nll, gold, pred, valid, **ctx):
        sr = losses.soft_regularization(access.input_embeddings(), gold, pred)  # M
        sr_sum = (sr * valid.float()).sum()
        return nll.sum() + self.cfg.synonym_sr_weight * sr_sum, {"sr_loss": sr_sum}

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        cls.log_mean(logging_outputs, "sr_loss", per="sample_size", round=4)
