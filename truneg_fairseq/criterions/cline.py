"""``--criterion cline``: CLINE's three terms (Wang et al., ACL 2021) on ``--task cline`` batches.

* l1, MLM on the masked x_ori (fairseq's ``masked_lm`` loss: summed NLL of the masked tokens);
* l2, replaced-token detection (Eq. 2-4): a per-token sigmoid on x_syn and on x_ant, BCE against
  the replaced labels the data carries, summed over the non-pad tokens of both;
* l3, the contrastive loss on the ``<s>`` vectors (Eq. 5-6) with dot-product similarity and one
  negative: -log e^{h_o.h_s} / (e^{h_o.h_s} + e^{h_o.h_a}) = softplus(h_o.h_a - h_o.h_s),
  computed in fp32 that way (no exponential can overflow, whatever the dot products).

Normalisation (exact under data-parallel sharding: every term is a sum, divided by a summed
``sample_size``): ``sample_size`` is the number of masked tokens, as in ``masked_lm``, so l1 is
the per-masked-token mean. l2 enters as ``mask_prob * sum``, which in expectation is the per-token
mean on x_syn plus that on x_ant (Eq. 4 as means). Each triple's l3 enters with the coefficient
``mask_prob * |x_ori|`` (its expected number of masked tokens), so the term is the mean over
triples weighted by sentence length; triples without a negative (no eligible word) get 0.

    loss = w_mlm * l1 + w_rtd * l2 + w_cts * l3                     (fixed weights, default 1)
    loss = sum_i exp(-s_i) * l_i + s_i                               (--cline-learned-weights)

with s = the model's ``cline_log_vars`` (homoscedastic uncertainty weighting, as the authors'
code). Every term is logged in the loss's unit (bits per masked token), so the logged ``loss`` is
the weighted sum of the logged ``mlm_loss`` (comparable with ``masked_lm``; also ``ppl``),
``rtd_loss`` (l2) and ``cts_loss`` (l3), with the ``--cline-*-weight`` values or, learned, the
logged ``w_mlm``, ``w_rtd``, ``w_cts`` (exp(-s)) plus ``logvar_loss`` (sum of s). Statistics:
``rtd_bce`` (nats per token), ``rtd_acc``, ``rtd_replaced``, ``cts_nll`` (nats per triple with a
negative), ``cts_acc`` (% of those with h_o.h_s > h_o.h_a), ``cts_pairs``.
"""

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics

from truneg_fairseq.core import losses
from truneg_fairseq.core.selection import MaskSelection
from truneg_fairseq.criterions import logs
from truneg_fairseq.errors import FlagError
from truneg_fairseq.models.step_config import plain_config

TERMS = ("mlm", "rtd", "cts")


def contrastive_loss(h_ori: torch.Tensor, h_syn: torch.Tensor, h_ant: torch.Tensor) -> torch.Tensor:
    """Eq. 6 per triple, stably: h_* B x C (any float dtype; fp32 math) -> B values >= 0."""
    h_ori, h_syn, h_ant = h_ori.float(), h_syn.float(), h_ant.float()
    pos = (h_ori * h_syn).sum(-1)  # B
    neg = (h_ori * h_ant).sum(-1)  # B
    return F.softplus(neg - pos)


@dataclass
class ClineCriterionConfig(FairseqDataclass):
    cline_mlm_weight: float = field(default=1.0, metadata={"help": "weight of the MLM term l1"})
    cline_rtd_weight: float = field(
        default=1.0, metadata={"help": "weight of the replaced-token-detection term l2"}
    )
    cline_cts_weight: float = field(
        default=1.0, metadata={"help": "weight of the contrastive term l3"}
    )
    cline_learned_weights: bool = field(
        default=False,
        metadata={
            "help": "learn the term weights (homoscedastic uncertainty: exp(-s_i) * l_i + s_i with "
            "learned log-variances s, parameters of the model) instead of the fixed --cline-*-weight"
        },
    )


@register_criterion("cline", dataclass=ClineCriterionConfig)
class ClineCriterion(FairseqCriterion):
    def __init__(self, cfg: ClineCriterionConfig, task):
        super().__init__(task)
        from truneg_fairseq.tasks.cline import ClineTask

        if not isinstance(task, ClineTask):
            raise FlagError(
                f"--criterion cline needs --task cline (aligned x_ori/x_syn/x_ant triples from "
                f"scripts/make_cline_data.py); got --task {type(task).__name__}"
            )
        fixed = (cfg.cline_mlm_weight, cfg.cline_rtd_weight, cfg.cline_cts_weight)
        if cfg.cline_learned_weights and fixed != (1.0, 1.0, 1.0):
            raise FlagError(
                "--cline-learned-weights learns the weights: drop --cline-mlm/rtd/cts-weight"
            )
        self.cfg = plain_config(cfg)  # read inside every step: plain values
        self.weights = fixed
        self.mask_prob = float(task.cfg.mask_prob)

    def forward(self, model, sample, reduce=True):
        c = sample["cline"]
        ori, target = sample["net_input"]["src_tokens"], sample["target"]  # B x T
        B = ori.size(0)
        pad = self.padding_idx
        sel = MaskSelection(target.ne(pad))
        tokens = torch.cat([ori, c["syn_tokens"], c["ant_tokens"]], dim=0)  # 3B x T
        # the one call of the model's forward: DistributedDataParallel synchronises what runs there
        net = model(tokens, cline_n_ori=B, masked_tokens=sel.masked, cline_targets=target)
        mlm_logits, rtd_logits, cls = net["mlm_logits"], net["rtd_logits"], net["cls"]

        gold = sel.take(target)  # M
        nll = losses.masked_nll(mlm_logits, gold, pad)  # M
        sample_size = gold.ne(pad).sum()

        pair_tokens = tokens[B:]  # 2B x T
        rtd_w = pair_tokens.ne(pad).float()  # 2B x T
        rtd_labels = torch.cat([c["syn_labels"], c["ant_labels"]], dim=0)  # 2B x T
        bce = losses.rtd_loss(rtd_logits, rtd_labels.float(), rtd_w)  # 2B x T

        cts = contrastive_loss(cls[:B], cls[B : 2 * B], cls[2 * B :])  # B
        has_neg = c["has_negative"].float()  # B
        cts_coef = self.mask_prob * ori.ne(pad).sum(dim=1).float() * has_neg  # B

        terms = (nll.sum(), self.mask_prob * bce.sum(), (cts * cts_coef).sum())
        loss, weights, logvar_sum = self._weigh(terms, net["log_vars"].float(), sample_size)
        with torch.no_grad():
            pos = torch.einsum("bc,bc->b", cls[:B].float(), cls[B : 2 * B].float())  # B
            neg = torch.einsum("bc,bc->b", cls[:B].float(), cls[2 * B :].float())  # B
            logging_output = {
                "loss": loss.detach(),
                "mlm_loss": terms[0].detach(),
                "rtd_loss": terms[1].detach(),
                "cts_loss": terms[2].detach(),
                "rtd_bce_sum": bce.sum().detach(),
                "rtd_tokens": rtd_w.sum(),
                "rtd_correct": (
                    rtd_logits.detach().gt(0).eq(rtd_labels.gt(0)).float() * rtd_w
                ).sum(),
                "rtd_replaced": (rtd_labels.gt(0).float() * rtd_w).sum(),
                "cts_nll_sum": (cts.detach() * has_neg).sum(),
                "cts_pairs": has_neg.sum(),
                "cts_correct": (pos.gt(neg).float() * has_neg).sum(),
                "ntokens": sample["ntokens"],
                "nsentences": B,
                "sample_size": sample_size,
            }
            if weights is not None:
                logging_output["logvar_loss"] = logvar_sum.detach()
                logging_output.update(
                    {f"w_{name}": weights[i].detach() for i, name in enumerate(TERMS)}
                )
                logging_output["w_count"] = 1
        return loss, sample_size, logging_output

    def _weigh(self, terms, log_vars: torch.Tensor, sample_size: torch.Tensor):
        """(loss, the learned weights or None, the log-variance term or None) of the three terms:
        fixed weights, or with ``--cline-learned-weights`` exp(-log_var) per term plus
        sum(log_vars) per masked token. ``log_vars``: 3."""
        if self.cfg.cline_learned_weights:
            weights = torch.exp(-log_vars)  # 3
            logvar_sum = log_vars.sum() * sample_size
            return sum(weights[i] * terms[i] for i in range(3)) + logvar_sum, weights, logvar_sum
        # the log-variances still join the graph (with zero gradient): data-parallel training then
        # needs no --find-unused-parameters
        return sum(w * t for w, t in zip(self.weights, terms)) + 0.0 * log_vars.sum(), None, None

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return logs.total(logging_outputs, key)

        # the terms, in the loss's unit: loss = the weighted sum of these
        logs.log_loss_terms(logging_outputs, ("mlm_loss", "rtd_loss", "cts_loss", "logvar_loss"))
        n_rtd = total("rtd_tokens")
        metrics.log_scalar("rtd_bce", total("rtd_bce_sum") / max(n_rtd, 1), n_rtd, round=4)
        metrics.log_scalar("rtd_acc", 100.0 * total("rtd_correct") / max(n_rtd, 1), n_rtd, round=2)
        metrics.log_scalar(
            "rtd_replaced", 100.0 * total("rtd_replaced") / max(n_rtd, 1), n_rtd, round=2
        )
        pairs = total("cts_pairs")
        metrics.log_scalar("cts_nll", total("cts_nll_sum") / max(pairs, 1), pairs, round=4)
        metrics.log_scalar("cts_acc", 100.0 * total("cts_correct") / max(pairs, 1), pairs, round=2)
        metrics.log_scalar_sum("cts_pairs", pairs, round=0)  # a count: summed over the batches
        workers = total("w_count")
        if workers:
            for name in TERMS:
                metrics.log_scalar(f"w_{name}", total(f"w_{name}") / workers, workers, round=4)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
