"""``sent_kl`` (``--criterion mlm_sent_kl``): masked LM + the sentence-level KL between the
encodings of the prediction-filled and of the original sentence (the paper's Sent^SR variant)."""

from truneg_fairseq.core.objectives.registry import Objective, Param, register_objective


@register_objective
class SentKL(Objective):
    """L_mlm + ``kl_weight`` x sum_t KL(softmax(H_p[t]) || softmax(H_s[t])) over the non-pad
    tokens: s_p is the input with each masked position filled by the argmax prediction, s the
    original sentence. Gradient always through H_p; through H_s only with ``kl_grad_original``
    (by default H_s is a fixed target, computed without a graph). Both encodings happen inside
    the model pass. Logged: ``mlm_loss`` and ``kl_loss``, ``loss = mlm_loss + kl_weight x
    kl_loss``."""

    name = "sent_kl"
    criterion = "mlm_sent_kl"
    outputs = ("sentence_kl",)
    params = (
        Param("kl_weight", 1.0, "weight of the KL term (summed over non-pad tokens)"),
        Param(
            "kl_grad_original",
            False,
            "let gradient flow through the original sentence's encoding H_s too; by default H_s "
            "is a fixed target and only H_p (prediction-filled) receives gradient",
            type=bool,
        ),
    )
    logged_terms = ("kl_loss",)

    def model_outputs(self):
        return self.outputs + (("sentence_kl_grad",) if self.kl_grad_original else ())

    def loss_terms(self, step):
        from truneg_fairseq.core import losses

        kl = losses.sentence_kl(step.net.kl_h_p, step.net.kl_h_s)  # B x T
        return [("kl_loss", self.kl_weight, (kl * step.nonpad.float()).sum())], {}
