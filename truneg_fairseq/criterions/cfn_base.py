"""Base criterion for counter-false-negative masked-LM training.

Subclasses (``mlm_hard_correction``, ``mlm_soft_reg``, ``mlm_sent_kl``) override
:meth:`CounterFalseNegativeLoss.objective` only. The base class runs the masked-LM head on the
masked positions, takes the argmax predictions, looks them up in the synonym table (when one is
given) and logs the correction statistics of the paper's Table 2:

* ``pred_corr_ratio``: predictions that are synonyms of the gold token / mispredicted masked
  positions (prediction level);
* ``iter_corr_ratio``: sequences with at least one such prediction / sequences (iteration level).
"""


import logging
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq import utils
from fairseq.criterions import FairseqCriterion
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.logging import metrics

from truneg_fairseq.criterions import losses
from truneg_fairseq.lexicon import SynonymLookup, SynonymTable

logger = logging.getLogger(__name__)


RTD_POLICIES = ChoiceEnum(["replaced", "original", "ignore"])


@dataclass
class SynonymCriterionConfig(FairseqDataclass):
    synonym_table: Optional[str] = field(
        default=None,
        metadata={
            "help": "synonym table (.npz) built for this data's dict.txt by "
            "scripts/build_synonym_table.py; a relative path is also looked up in the data dir"
        },
    )
    electra_gen_weight: float = field(
        default=1.0, metadata={"help": "ELECTRA only: weight of the generator MLM term"}
    )
    electra_disc_weight: float = field(
        default=50.0,
        metadata={"help": "ELECTRA only: weight of the replaced-token-detection term (per token)"},
    )
    rtd_synonym_policy: RTD_POLICIES = field(
        default="replaced",
        metadata={
            "help": "ELECTRA only: label for a sampled replacement that is a WordNet synonym of the "
            "original token: replaced (ELECTRA), original, or ignore (no loss); needs --synonym-table"
        },
    )


def resolve_table_path(path: str, task) -> str:
    if os.path.isabs(path) or os.path.exists(path):
        return path
    data = getattr(getattr(task, "cfg", None), "data", None)
    if data:
        cand = os.path.join(str(data).split(os.pathsep)[0], path)
        if os.path.exists(cand):
            return cand
    return path


def load_synonym_lookup(path: str, task) -> SynonymLookup:
    """Load a table, check it belongs to the task's dictionary, and wrap it for the device."""
    path = resolve_table_path(path, task)
    table = SynonymTable.load(path)
    symbols = task.source_dictionary.symbols
    table.check_dictionary(symbols, path)
    logger.info(
        f"synonym table {path}: {len(table)} pairs, source {table.meta.get('source')}, "
        f"coverage {table.meta.get('coverage')}, {len(table.continuation_ids)} continuation pieces"
    )
    return SynonymLookup(table, len(symbols))


class CounterFalseNegativeLoss(FairseqCriterion):
    """Masked-LM loss plus a counter-false-negative term (see subclasses)."""

    requires_table = False

    def __init__(self, cfg: SynonymCriterionConfig, task):
        super().__init__(task)
        self.cfg = cfg
        if cfg.synonym_table:
            self.lookup: Optional[SynonymLookup] = load_synonym_lookup(cfg.synonym_table, task)
        elif self.requires_table:
            raise ValueError(
                f"--criterion {self.criterion_name()} needs --synonym-table FILE: build one for "
                "DATA/dict.txt with `python scripts/build_synonym_table.py --dict DATA/dict.txt "
                "--tokenizer ... --output DATA/synonyms.npz`"
            )
        else:
            self.lookup = None
        if cfg.rtd_synonym_policy != "replaced" and self.lookup is None:
            raise ValueError(
                f"--rtd-synonym-policy {cfg.rtd_synonym_policy} needs --synonym-table FILE (which "
                "replacements are synonyms); without a table only the default 'replaced' applies"
            )
        # the RTD sum is scaled so that, divided by the masked-token count, it is a per-token mean
        self.mask_prob = float(getattr(getattr(task, "cfg", None), "mask_prob", 0.15) or 0.15)

    @classmethod
    def criterion_name(cls) -> str:
        return getattr(cls, "_registered_name", cls.__name__)

    # ---- model interface ----------------------------------------------------------------
    requires_electra = False

    @staticmethod
    def is_electra(model) -> bool:
        return getattr(model, "generator", None) is not None and hasattr(model, "discriminator_logits")

    def check_model(self, model) -> None:
        if self.is_electra(model):
            return
        enc = getattr(model, "encoder", None)
        if self.requires_electra or enc is None or not hasattr(enc, "lm_head") or not hasattr(enc, "sentence_encoder"):
            need = "an ELECTRA model" if self.requires_electra else "a masked-LM model with an LM head"
            raise ValueError(
                f"--criterion {self.criterion_name()} needs {need} (fairseq's roberta_* archs with "
                f"--task masked_lm, or this plugin's electra_* archs with --task electra); got "
                f"{type(model).__name__}"
            )

    def input_embeddings(self, model) -> torch.Tensor:
        """V x C input token embedding matrix (ELECTRA: shared by generator and discriminator)."""
        if self.is_electra(model):
            return model.embed_tokens.weight
        return model.encoder.sentence_encoder.embed_tokens.weight

    def encode(self, model, tokens: torch.Tensor) -> torch.Tensor:
        """B x T x C final-layer features of the masked-LM network (ELECTRA: the generator)."""
        if self.is_electra(model):
            return model.generator_features(tokens)
        return model(tokens, features_only=True)[0]

    # ---- the step ----------------------------------------------------------------------
    def forward(self, model, sample, reduce=True):
        self.check_model(model)
        target = sample["target"]  # B x T, padding outside the masked positions
        src_tokens = sample["net_input"]["src_tokens"]  # B x T
        masked = target.ne(self.padding_idx)  # B x T
        sample_size = masked.sum()
        # With nothing masked project every position (targets there are padding and add 0);
        # torch.where avoids a device-to-host sync.
        masked = torch.where(masked.any(), masked, torch.ones_like(masked))

        logits = model(**sample["net_input"], masked_tokens=masked)[0]  # M x V
        gold = target[masked]  # M
        valid = gold.ne(self.padding_idx)  # M
        nll = losses.masked_nll(logits, gold, self.padding_idx)  # M
        pred = logits.detach().argmax(dim=-1)  # M

        wrong = valid & pred.ne(gold)  # M
        original = torch.where(target.ne(self.padding_idx), target, src_tokens)  # B x T
        whole = None
        if self.lookup is not None:
            whole = self.lookup.ends_word(original)[masked]  # M: subword pieces are never corrected
            synonym = valid & whole & self.lookup.is_synonym(gold, pred)  # M
            # sequences with >= 1 synonym prediction
            per_row = torch.zeros_like(masked, dtype=torch.bool)
            per_row[masked] = synonym
            n_seq_syn = per_row.any(dim=1).sum()
        else:
            synonym = torch.zeros_like(valid)
            n_seq_syn = synonym.sum()

        ctx = dict(
            model=model, sample=sample, masked=masked, gold=gold, valid=valid, pred=pred,
            nll=nll, synonym=synonym,
        )
        loss, terms = self.objective(**ctx)
        if self.is_electra(model):
            rtd_sum, rtd_terms = self.replaced_token_detection(model, src_tokens, original, masked, logits, gold, valid, whole)
            loss = self.cfg.electra_gen_weight * loss + self.cfg.electra_disc_weight * self.mask_prob * rtd_sum
            terms.update(rtd_terms)

        logging_output = {
            "loss": loss.data,
            "mlm_loss": nll.sum().data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
            "n_wrong": wrong.sum(),
            "n_correct": (valid & ~wrong).sum(),
        }
        if self.lookup is not None:
            logging_output["n_synonym"] = synonym.sum()
            logging_output["n_seq_synonym"] = n_seq_syn
        for k, v in terms.items():
            logging_output[k] = v.data if torch.is_tensor(v) else v
        return loss, sample_size, logging_output

    def replaced_token_detection(self, model, src_tokens, original, masked, gen_logits, gold, valid, whole):
        """ELECTRA's discriminator term: sample replacements at the masked positions, label each
        token replaced/original, and sum the per-token BCE. Returns (sum, summable counts)."""
        sampled = model.sample_replacements(gen_logits)  # M, no gradient
        sampled = torch.where(valid, sampled, src_tokens[masked])  # M (padding targets keep their token)
        corrupted = src_tokens.clone()  # B x T
        corrupted[masked] = sampled
        nonpad = original.ne(self.padding_idx)  # B x T
        disc_logits = model.discriminator_logits(corrupted)  # B x T
        syn_sample = torch.zeros_like(nonpad)  # B x T
        if self.lookup is not None:
            syn_sample[masked] = valid & whole & self.lookup.is_synonym(gold, sampled)
        labels, weights, replaced = losses.rtd_targets(original, corrupted, nonpad, syn_sample, self.cfg.rtd_synonym_policy)
        rtd = losses.rtd_loss(disc_logits, labels, weights)  # B x T
        predicted = disc_logits.detach().gt(0) & nonpad  # B x T
        counted = weights.gt(0)
        is_pos = labels.gt(0.5) & counted
        terms = {
            "disc_loss": rtd.sum(),
            "disc_tokens": counted.sum(),
            "disc_correct": (predicted.eq(is_pos) & counted).sum(),
            "rtd_replaced": replaced.sum(),
            "rtd_true_pos": (predicted & is_pos).sum(),
            "rtd_pred_pos": (predicted & counted).sum(),
            "rtd_pos": is_pos.sum(),
        }
        if self.lookup is not None:
            terms["rtd_synonym"] = (syn_sample & replaced).sum()
        return rtd.sum(), terms

    def objective(self, nll, **ctx):
        """Return (loss_sum, {name: summable logged value}).

        The base objective is plain masked-LM (Eq. 1); subclasses change or extend it.
        """
        return nll.sum(), {}

    # ---- metrics ---------------------------------------------------------------------
    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return utils.item(sum(log.get(key, 0) for log in logging_outputs))

        sample_size = total("sample_size")
        nsent = total("nsentences")
        if sample_size == 0:
            return
        metrics.log_scalar("loss", total("loss") / sample_size / math.log(2), sample_size, round=3)
        metrics.log_scalar("mlm_loss", total("mlm_loss") / sample_size / math.log(2), sample_size, round=3)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg))
        metrics.log_scalar("mlm_acc", 100.0 * total("n_correct") / sample_size, sample_size, round=2)
        if any("n_synonym" in log for log in logging_outputs):
            n_wrong = total("n_wrong")
            metrics.log_scalar(
                "pred_corr_ratio", 100.0 * total("n_synonym") / max(n_wrong, 1), n_wrong, round=3
            )
            metrics.log_scalar(
                "iter_corr_ratio", 100.0 * total("n_seq_synonym") / max(nsent, 1), nsent, round=3
            )
        if any("sr_loss" in log for log in logging_outputs):
            metrics.log_scalar("sr_loss", total("sr_loss") / sample_size, sample_size, round=4)
        if any("disc_loss" in log for log in logging_outputs):
            n_disc = total("disc_tokens")
            n_rep = total("rtd_replaced")
            metrics.log_scalar("disc_loss", total("disc_loss") / max(n_disc, 1), n_disc, round=4)
            metrics.log_scalar("disc_acc", 100.0 * total("disc_correct") / max(n_disc, 1), n_disc, round=2)
            metrics.log_scalar("replaced", 100.0 * n_rep / max(n_disc, 1), n_disc, round=2)
            pred_pos, pos = total("rtd_pred_pos"), total("rtd_pos")
            metrics.log_scalar("rtd_precision", 100.0 * total("rtd_true_pos") / max(pred_pos, 1), pred_pos, round=2)
            metrics.log_scalar("rtd_recall", 100.0 * total("rtd_true_pos") / max(pos, 1), pos, round=2)
            if any("rtd_synonym" in log for log in logging_outputs):
                metrics.log_scalar("rtd_synonym", 100.0 * total("rtd_synonym") / max(n_rep, 1), n_rep, round=3)
        if any("kl_loss" in log for log in logging_outputs):
            kl_tokens = total("kl_tokens")
            metrics.log_scalar("kl_loss", total("kl_loss") / max(kl_tokens, 1), kl_tokens, round=5)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
