"""``--criterion mlm_plain``: Eq. 1, plain masked LM, with the false-negative statistics."""

from fairseq.criterions import register_criterion

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig


@register_criterion("mlm_plain", dataclass=SynonymCriterionConfig)
class PlainMaskedLMLoss(CounterFalseNegativeLoss):
    """The baseline beside the counter-false-negative criterions: the loss and its gradients are
    fairseq's ``masked_lm`` (the summed NLL of the masked positions over their number, nothing
    left out, nothing added), and the log holds what the others log (``mlm_loss``, ``mlm_acc``
    and, with ``--synonym-table``, ``syn_acc``, ``pred_corr_ratio``, ``iter_corr_ratio``,
    ``content_pred``), so a baseline's ratios over training are read from the same kind of log
    as hard correction's. The table only counts: every synonym prediction stays in the loss,
    and a table of 0 pairs is a warning. It takes fairseq's ``roberta_*`` archs (the logits
    alone), the plugin's ``truneg_roberta_*`` and ``bert_hf_*`` (static slots, compiled steps);
    on an ELECTRA model it is the ``electra`` objective."""

    _registered_name = "mlm_plain"
