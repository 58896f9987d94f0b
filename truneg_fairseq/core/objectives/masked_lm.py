"""``mlm`` (``--criterion mlm_plain``): Eq. 1, plain masked LM. A synonym table, if given, only
adds the false-negative statistics; every synonym prediction stays in the loss."""

from truneg_fairseq.core.objectives.registry import Objective, register_objective


@register_objective
class PlainMaskedLM(Objective):
    """The baseline: the loss and gradients are fairseq's ``masked_lm`` (the summed NLL of the
    masked positions over their number), with the statistics the others log."""

    name = "mlm"
    criterion = "mlm_plain"
