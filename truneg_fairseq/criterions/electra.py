"""``--criterion electra``: generator MLM + 50 x discriminator replaced-token detection."""

from fairseq.criterions import register_criterion

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig


@register_criterion("electra", dataclass=SynonymCriterionConfig)
class ElectraLoss(CounterFalseNegativeLoss):
    """ELECTRA's objective without counter-false-negative terms: ``--electra-gen-weight`` x MLM
    (masked positions) + ``--electra-disc-weight`` x mean BCE over the tokens. A synonym table is
    optional: it adds the correction statistics and enables ``--electra-rtd-synonym-policy``."""

    _registered_name = "electra"
    requires_discriminator = True
