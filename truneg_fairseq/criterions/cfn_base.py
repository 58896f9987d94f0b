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
from typing import Dict, Optional

import torch
from fairseq import utils
from fairseq.criterions import FairseqCriterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics

from truneg_fairseq.criterions import losses
from truneg_fairseq.lexicon import SynonymLookup, SynonymTable

logger = logging.getLogger(__name__)


@dataclass
class SynonymCriterionConfig(FairseqDataclass):
    synonym_table: Optional[str] = field(
        default=None,
        metadata={
            "help": "synonym table (.npz) built for this data's dict.txt by "
            "scripts/build_synonym_table.py; a relative path is also looked up in the data dir"
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

    @classmethod
    def criterion_name(cls) -> str:
        return getattr(cls, "_registered_name", cls.__name__)

    # ---- model interface ----------------------------------------------------------------
    def check_model(self, model) -> None:
        enc = getattr(model, "encoder", None)
        if enc is None or not hasattr(enc, "lm_head") or not hasattr(enc, "sentence_encoder"):
            raise ValueError(
                f"--criterion {self.criterion_name()} needs a masked-LM model with an LM head "
                f"(fairseq's roberta_* archs or this plugin's electra_*); got "
                f"{type(model).__name__}. Use --task masked_lm --arch roberta_base (or similar)."
            )

    def input_embeddings(self, model) -> torch.Tensor:
        """V x C input token embedding matrix."""
        return model.encoder.sentence_encoder.embed_tokens.weight

    def encode(self, model, tokens: torch.Tensor) -> torch.Tensor:
        """B x T x C final-layer features of ``tokens``."""
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
        if self.lookup is not None:
            s = torch.where(target.ne(self.padding_idx), target, src_tokens)  # B x T original
            whole = self.lookup.ends_word(s)[masked]  # M: subword pieces are never corrected
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
        if any("kl_loss" in log for log in logging_outputs):
            kl_tokens = total("kl_tokens")
            metrics.log_scalar("kl_loss", total("kl_loss") / max(kl_tokens, 1), kl_tokens, round=5)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
