"""``--criterion mlm_sent_kl``: masked-LM + sentence-level KL between the encodings of the
prediction-filled sentence and of the original sentence (the paper's Sent^SR variant)."""

from dataclasses import dataclass, field

from fairseq.criterions import register_criterion

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig


@dataclass
class SentKLConfig(SynonymCriterionConfig):
    synonym_kl_weight: float = field(
        default=1.0, metadata={"help": "weight of the KL term (summed over non-pad tokens)"}
    )
    synonym_kl_grad_original: bool = field(
        default=False,
        metadata={
            "help": "let gradient flow through the original sentence's encoding H_s too; by "
            "default H_s is a fixed target and only H_p (prediction-filled) receives gradient"
        },
    )


@register_criterion("mlm_sent_kl", dataclass=SentKLConfig)
class SentKLLoss(CounterFalseNegativeLoss):
    """L_mlm + w * sum_t KL(softmax(H_p[t]) || softmax(H_s[t])).

    s_p is the input sentence with each masked position filled by the argmax prediction; s is the
    original sentence. Gradient: always through H_p; through H_s only with
    ``--synonym-kl-grad-original``. By default H_s is a fixed target, so the clean-sentence
    encoding is not pulled toward the perturbed one, and it is computed under ``no_grad`` (no
    activations kept, no backward). When both sides need gradient, and in validation, the two
    extra passes run as one batched encoder call of 2B rows. All of it happens in the model's
    forward (:mod:`truneg_fairseq.models.objectives`). The KL is summed over non-padding tokens
    and, like the MLM term, divided by the number of masked tokens. Logged terms: ``mlm_loss`` and
    ``kl_loss`` (per masked token, in bits): ``loss = mlm_loss + --synonym-kl-weight x kl_loss``."""

    _registered_name = "mlm_sent_kl"
    objective = "sent_kl"
    weight_field = "synonym_kl_weight"
    model_outputs = ("sentence_kl",)

    def model_output_names(self):
        return self.model_outputs + (
            ("sentence_kl_grad",) if self.cfg.synonym_kl_grad_original else ()
        )
