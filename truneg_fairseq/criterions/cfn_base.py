"""Base criterion for counter-false-negative masked-LM training.

Subclasses (``mlm_hard_correction``, ``mlm_soft_reg``, ``mlm_sent_kl``, ``electra``) override
:meth:`CounterFalseNegativeLoss.objective` and log their own terms in their own
``reduce_metrics``. The base class runs the masked-LM head on the masked positions (through the
model interface of :mod:`truneg_fairseq.models.access`, so it never asks which model it has),
takes the argmax predictions, looks them up in the synonym table (when one is given) and logs the
correction statistics of the paper's Table 2:

* ``pred_corr_ratio``: predictions that are synonyms of the gold token / mispredicted masked
  positions (prediction level);
* ``iter_corr_ratio``: sequences with at least one such prediction / sequences (iteration level).

When the model has a discriminator (ELECTRA), the replaced-token-detection term of
:mod:`truneg_fairseq.criterions.rtd` is added to whatever the subclass computes.
"""


import logging
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq import utils
from fairseq.criterions import FairseqCriterion
from fairseq.dataclass import ChoiceEnum
from fairseq.logging import metrics
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
from omegaconf import II

from truneg_fairseq.criterions import losses, rtd
from truneg_fairseq.criterions.selection import MaskSelection, SlotSelection, static_slot_count
from truneg_fairseq.lexicon import SynonymLookup, SynonymTable
from truneg_fairseq.models.access import DDP_BACKEND_MESSAGE, mismatch_message, mlm_access, provides_mlm

logger = logging.getLogger(__name__)


@dataclass
class SynonymCriterionConfig(rtd.ReplacedTokenDetectionConfig):
    synonym_table: Optional[str] = field(
        default=None,
        metadata={
            "help": "synonym table (.npz) built for this data's dict.txt by "
            "scripts/build_synonym_table.py; a relative path is also looked up in the data dir"
        },
    )
    mlm_prediction_slots: ChoiceEnum(["dynamic", "static"]) = field(
        default="dynamic",
        metadata={
            "help": "dynamic: predict exactly the masked positions (boolean indexing, shapes vary "
            "per batch); static: N fixed slots per sequence (gather/scatter, no host sync: for "
            "torch.compile and CUDA graphs), N from --mlm-max-predictions or "
            "ceil((mask_prob + 0.005) * T). Same losses on the same masks"
        },
    )
    mlm_max_predictions: Optional[int] = field(
        default=None,
        metadata={
            "help": "static slots per sequence; masked positions beyond it are left out of the "
            "loss and counted as slots_dropped (raise it for whole-word masking)"
        },
    )
    mlm_loss_divisor: float = field(
        default=1.0,
        metadata={
            "help": "divide the loss and the sample size by this constant before fairseq's backward "
            "pass: the update is unchanged (fairseq divides the gradients by the summed sample size, "
            "on every worker alike), but fp16 gradient sums stay in range. With --fp16 use about the "
            "masked tokens per batch (batch x tokens-per-sample x mask-prob, e.g. 8192 for ELECTRA "
            "at 512 x 128); 1 keeps fairseq's plain sums"
        },
    )
    # the model's name (the same --arch flag): lets the criterion refuse a model it cannot
    # train when it is built, before any step
    arch: str = II("model._name")
    # multi-worker settings (the same flags): torch's DDP cannot see the named model calls
    ddp_backend: str = II("distributed_training.ddp_backend")
    distributed_world_size: int = II("distributed_training.distributed_world_size")


def _resolved(value):
    """None for an interpolation left unresolved (a config built in code, outside fairseq)."""
    return None if isinstance(value, str) and value.startswith("${") else value


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
    requires_discriminator = False

    def __init__(self, cfg: SynonymCriterionConfig, task):
        super().__init__(task)
        self.cfg = cfg
        self._check_model_class(cfg)
        world, backend = _resolved(cfg.distributed_world_size), _resolved(cfg.ddp_backend)
        if world and int(world) > 1 and backend in ("pytorch_ddp", "c10d"):
            raise ValueError(f"--ddp-backend {backend}: {DDP_BACKEND_MESSAGE}")
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
        if cfg.electra_rtd_synonym_policy != "replaced" and self.lookup is None:
            raise ValueError(
                f"--electra-rtd-synonym-policy {cfg.electra_rtd_synonym_policy} needs --synonym-table "
                "FILE (which replacements are synonyms); without a table only the default 'replaced' "
                "applies"
            )
        # unresolved only for a config built in code, outside fairseq: then the task's own value
        mask_prob = cfg.mask_prob if _resolved(cfg.mask_prob) is not None else getattr(task.cfg, "mask_prob", None)
        self.mask_prob = None if mask_prob is None else float(mask_prob)

    @classmethod
    def criterion_name(cls) -> str:
        return getattr(cls, "_registered_name", cls.__name__)

    # ---- model checks ------------------------------------------------------------------------
    def _check_model_class(self, cfg) -> None:
        """Refuse, when the criterion is built, a model that cannot be trained with it."""
        name = _resolved(cfg.arch)
        model_cls = ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name) if name else None
        if model_cls is None:
            return  # not known yet: checked on the model itself at the first step
        self._check_capabilities(
            model_cls.__name__, provides_mlm(model_cls), callable(getattr(model_cls, "discriminator_logits", None)),
            f"--arch {name}",
        )

    def _check_capabilities(self, model_name: str, has_mlm: bool, has_disc: bool, what: str) -> None:
        if not has_mlm:
            raise ValueError(mismatch_message(self.criterion_name(), f"{model_name} ({what})"))
        if self.requires_discriminator and not has_disc:
            raise ValueError(
                f"--criterion {self.criterion_name()} needs an ELECTRA model (--arch electra_small, "
                f"electra_base, electra_large with --task electra); got {model_name} ({what})"
            )
        changed = rtd.changed_electra_flags(self.cfg)
        if changed and not has_disc:
            raise ValueError(
                f"{', '.join(changed)} only appl{'ies' if len(changed) == 1 else 'y'} to ELECTRA "
                f"(a model with a discriminator); {model_name} ({what}) has none: remove the flag "
                "or use --task electra --arch electra_*"
            )

    def access(self, model):
        """The model interface of :mod:`truneg_fairseq.models.access`, checked for this criterion."""
        access = mlm_access(model, self.criterion_name())
        self._check_capabilities(type(model).__name__, True, access.has_discriminator, "the model given")
        return access

    def encode(self, model, tokens: torch.Tensor) -> torch.Tensor:
        """B x T x C final-layer features of the masked-LM network (ELECTRA: the generator)."""
        return mlm_access(model, self.criterion_name()).mlm_features(tokens)

    # ---- the step ----------------------------------------------------------------------
    def select(self, target: torch.Tensor):
        """The positions the masked-LM head predicts (see :mod:`.selection`)."""
        masked = target.ne(self.padding_idx)  # B x T
        if self.cfg.mlm_prediction_slots == "static":
            n = static_slot_count(target.size(1), self.mask_prob, self.cfg.mlm_max_predictions)
            return SlotSelection(masked, n)
        return MaskSelection(masked)

    def forward(self, model, sample, reduce=True):
        access = self.access(model)
        target = sample["target"]  # B x T, padding outside the masked positions
        src_tokens = sample["net_input"]["src_tokens"]  # B x T
        sel = self.select(target)
        if self.cfg.mlm_loss_divisor <= 0:
            raise ValueError(f"--mlm-loss-divisor must be > 0, got {self.cfg.mlm_loss_divisor}")

        logits = sel.logits(access, src_tokens)  # S x V (S: masked positions or B*N slots)
        gold = sel.take(target)  # S
        valid = gold.ne(self.padding_idx)  # S
        sample_size = valid.sum()
        nll = losses.masked_nll(logits, gold, self.padding_idx)  # S
        pred = logits.detach().argmax(dim=-1)  # S

        wrong = valid & pred.ne(gold)  # S
        original = torch.where(target.ne(self.padding_idx), target, src_tokens)  # B x T
        whole = None
        if self.lookup is not None:
            whole = sel.take(self.lookup.ends_word(original))  # S: subword pieces are never corrected
            synonym = valid & whole & self.lookup.is_synonym(gold, pred)  # S
            n_seq_syn = sel.rows_any(synonym).sum()  # sequences with >= 1 synonym prediction
        else:
            synonym = torch.zeros_like(valid)
            n_seq_syn = synonym.sum()

        ctx = dict(
            model=model, access=access, sample=sample, sel=sel, gold=gold, valid=valid,
            pred=pred, nll=nll, synonym=synonym,
        )
        loss, terms = self.objective(**ctx)
        if access.has_discriminator:
            if self.mask_prob is None:
                raise ValueError(
                    f"--criterion {self.criterion_name()} on a model with a discriminator needs a "
                    "task with --mask-prob (--task electra)"
                )
            rtd_sum, rtd_terms = rtd.rtd_term(
                access, self.cfg, self.lookup, src_tokens, original, sel, logits, gold, valid,
                whole, self.padding_idx,
            )
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
        if sel.dropped is not None:
            logging_output["slots_dropped"] = sel.dropped
        if self.lookup is not None:
            logging_output["n_synonym"] = synonym.sum()
            logging_output["n_seq_synonym"] = n_seq_syn
        for k, v in terms.items():
            logging_output[k] = v.data if torch.is_tensor(v) else v
        if self.cfg.mlm_loss_divisor != 1.0:
            # the logged values above stay sums; only what fairseq differentiates and divides by
            # is scaled, by the same constant on every worker
            loss = loss / self.cfg.mlm_loss_divisor
            sample_size = sample_size / self.cfg.mlm_loss_divisor
        return loss, sample_size, logging_output

    def objective(self, nll, **ctx):
        """Return (loss_sum, {name: summable logged value}).

        The base objective is plain masked-LM (Eq. 1); subclasses change or extend it.
        """
        return nll.sum(), {}

    # ---- metrics ---------------------------------------------------------------------
    @staticmethod
    def total(logging_outputs, key):
        return utils.item(sum(log.get(key, 0) for log in logging_outputs))

    @classmethod
    def log_mean(cls, logging_outputs, key: str, per: str, round: int) -> None:
        """Log summed ``key`` / summed ``per`` under ``key`` (nothing when ``per`` sums to 0)."""
        denom = cls.total(logging_outputs, per)
        if denom:
            metrics.log_scalar(key, cls.total(logging_outputs, key) / denom, denom, round=round)

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        def total(key):
            return cls.total(logging_outputs, key)

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
        if any("slots_dropped" in log for log in logging_outputs):
            # masked positions beyond --mlm-max-predictions (static slots): not in the loss
            metrics.log_scalar("slots_dropped", total("slots_dropped"), round=1)
        rtd.reduce_rtd_metrics(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
