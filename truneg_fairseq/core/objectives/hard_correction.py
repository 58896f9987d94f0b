"""``hard_correction`` (``--criterion mlm_hard_correction``): Eq. 2, masked LM without the false
negatives."""

from truneg_fairseq.core.objectives.registry import Objective, register_objective


@register_objective
class HardCorrection(Objective):
    """Masked positions whose argmax is a WordNet synonym of the gold token (a whole word, never a
    subword piece) are left out of the loss: they get no gradient. The normaliser stays the
    number of masked tokens, so with an empty table the loss is plain masked LM. Logged:
    ``mlm_loss`` (every masked position) and ``corrected_loss`` (the part left out),
    ``loss = mlm_loss - corrected_loss``; the share left out is ``pred_corr_ratio``."""

    name = "hard_correction"
    criterion = "mlm_hard_correction"
    needs_table = True
    logged_terms = ("corrected_loss",)

    def loss_terms(self, step):
        from truneg_fairseq.core import losses

        return [("corrected_loss", -1.0, losses.corrected_nll(step.nll, step.synonym).sum())], {}
