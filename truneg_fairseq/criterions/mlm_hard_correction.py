"""``--criterion mlm_hard_correction``: Eq. 2, masked-LM without the false negatives."""

from dataclasses import dataclass

from fairseq.criterions import register_criterion

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig


@dataclass
class HardCorrectionConfig(SynonymCriterionConfig):
    pass


@register_criterion("mlm_hard_correction", dataclass=HardCorrectionConfig)
class HardCorrectionLoss(CounterFalseNegativeLoss):
    """Masked positions whose argmax prediction is a WordNet synonym of the gold token (a whole
    word, never a subword piece) are left out of the loss: they get no gradient. The normaliser
    stays the number of masked tokens, so with an empty table the loss and gradients are exactly
    fairseq's ``masked_lm``. The share of left-out positions is logged as ``pred_corr_ratio``.
    Logged terms: ``mlm_loss`` (every masked position) and ``corrected_loss`` (the part left
    out): ``loss = mlm_loss - corrected_loss``."""

    _registered_name = "mlm_hard_correction"
    objective = "hard_correction"
    requires_table = True
