"""``--criterion mlm_sent_kl``: masked-LM + sentence-level KL between the encodings of the
prediction-filled sentence and of the original sentence (the paper's Sent^SR variant)."""

from dataclasses import dataclass, field

import torch
from fairseq.criterions import register_criterion

from truneg_fairseq.criterions import losses
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
    extra passes run as one batched encoder call of 2B rows. The KL is
    summed over non-padding tokens and, like the MLM term, divided by the number of masked tokens.
    Logged: ``kl_loss`` (mean KL per token)."""

    _registered_name = "mlm_sent_kl"

    def objective(self, model, sample, sel, pred, valid, nll, **ctx):
        target = sample["target"]  # B x T
        src = sample["net_input"]["src_tokens"]  # B x T
        s = torch.where(target.ne(self.padding_idx), target, src)  # B x T: masks -> gold tokens
        s_p = sel.put(s, torch.where(valid, pred, sel.take(s)))  # B x T: masks -> predictions
        if self.cfg.synonym_kl_grad_original or not torch.is_grad_enabled():
            bsz = s.size(0)
            h = self.encode(model, torch.cat([s_p, s], dim=0))  # 2B x T x C
            h_p, h_s = h[:bsz], h[bsz:]  # B x T x C each
        else:
            # H_s is a fixed target: encode it without building a graph. Batching it with s_p
            # would make the backward pass pay for rows that receive no gradient (about 20%
            # more step time for this criterion).
            h_p = self.encode(model, s_p)  # B x T x C
            with torch.no_grad():
                h_s = self.encode(model, s)  # B x T x C
        nonpad = s.ne(self.padding_idx)  # B x T
        kl_sum = (losses.sentence_kl(h_p, h_s) * nonpad.float()).sum()
        loss = nll.sum() + self.cfg.synonym_kl_weight * kl_sum
        return loss, {"kl_loss": kl_sum, "kl_tokens": nonpad.sum()}

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        cls.log_mean(logging_outputs, "kl_loss", per="kl_tokens", round=5)
