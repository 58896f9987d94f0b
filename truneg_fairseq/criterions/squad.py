"""``--criterion squad``: start/end cross-entropy; in validation, official EM/F1 as metrics."""

import math

import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics

from truneg_fairseq.criterions import logs
from truneg_fairseq.data import squad_windows as squad
from truneg_fairseq.evaluation import squad_metrics


@register_criterion("squad", dataclass=FairseqDataclass)
class SquadSpanLoss(FairseqCriterion):
    def forward(self, model, sample, reduce=True):
        tokens = sample["net_input"]["src_tokens"]  # F x T
        start_logits, end_logits = squad.span_logits(model, tokens, self.padding_idx)  # F x T each
        loss = F.cross_entropy(start_logits, sample["start"], reduction="sum") + F.cross_entropy(
            end_logits, sample["end"], reduction="sum"
        )
        n = tokens.size(0)
        log = {
            "loss": loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": n,
        }
        if not model.training and "squad" in sample:  # validation batches hold whole questions
            cfg = self.task.cfg
            info = sample["squad"]
            preds = squad.decode(
                info, start_logits, end_logits, cfg.squad_n_best, cfg.squad_max_answer_len
            )
            em = f1 = 0.0
            for qid, golds in zip(info["qids"], info["answers"]):
                em += max((squad_metrics.exact_match(preds[qid], g) for g in golds), default=0.0)
                f1 += max((squad_metrics.f1(preds[qid], g) for g in golds), default=0.0)
            log.update(em_sum=em, f1_sum=f1, n_questions=len(preds))
        return loss, n, log

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return logs.total(logging_outputs, key)

        n = total("sample_size")
        metrics.log_scalar("loss", total("loss") / max(n, 1) / math.log(2), n, round=3)
        nq = total("n_questions")
        if nq:
            metrics.log_scalar("em", 100.0 * total("em_sum") / nq, nq, round=2)
            metrics.log_scalar("f1", 100.0 * total("f1_sum") / nq, nq, round=2)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
