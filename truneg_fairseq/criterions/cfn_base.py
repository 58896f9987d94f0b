"""Base criterion for counter-false-negative masked-LM training.

Each step calls the (possibly wrapped) model exactly once, ``model(**net_input, masked_tokens
or mlm_positions, mlm_targets, mlm_outputs)``, and reads only the dict it returns
(:mod:`truneg_fairseq.models.objectives`): what torch's DistributedDataParallel runs in its
``forward`` is what it synchronises. fairseq's own RoBERTa (``--arch roberta_*``) is called
through its masked-LM forward (``model(src_tokens, masked_tokens=M)``), which is enough for the
objectives that need the logits alone.

Subclasses (``mlm_hard_correction``, ``mlm_soft_reg``, ``mlm_sent_kl``, ``electra``) declare the
extra model outputs they need (``model_outputs``) and return their loss as named terms with
weights (:meth:`CounterFalseNegativeLoss.objective`). The logged ``loss`` is exactly the weighted
sum of the logged terms, all in one unit (bits per masked token). The base class also looks the
argmax predictions up in the synonym table (when one is given) and logs the false-negative
statistics of the paper's Table 2 (``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``,
``iter_corr_ratio``, ``content_pred``, ``nseq``, ``special_masked``), counted and defined in
:mod:`truneg_fairseq.evaluation.false_negatives`, the one place that defines them.

When the model detects replaced tokens (ELECTRA), the MLM terms are weighted by
``--electra-gen-weight`` and the replaced-token-detection term of
:mod:`truneg_fairseq.criterions.rtd` is added with ``--electra-disc-weight``.
"""

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.criterions import FairseqCriterion
from fairseq.dataclass import ChoiceEnum
from fairseq.logging import metrics
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
from fairseq.models.roberta import RobertaModel
from omegaconf import II

from truneg_fairseq.criterions import logs, losses, rtd
from truneg_fairseq.criterions.tables import check_resumed_table, load_synonym_lookup
from truneg_fairseq.errors import FlagError
from truneg_fairseq.evaluation import false_negatives as fn
from truneg_fairseq.lexicon import SynonymLookup
from truneg_fairseq.models.objectives import MaskedLMObjectives, ReplacedTokenDetection
from truneg_fairseq.models.selection import MaskSelection, SlotSelection, static_slot_count
from truneg_fairseq.models.step_config import plain_config

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
    synonym_reset_table: bool = field(
        default=False,
        metadata={
            "help": "resume from a checkpoint trained with another --synonym-table (or none) and go "
            "on with this one; without it such a resume is refused. Every checkpoint records its "
            "table's content fingerprint; one restored with --reset-optimizer starts a new run "
            "and is not checked"
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
    # the model's name (the same --arch flag): what the model's class declares it serves decides,
    # when the criterion is built, how it is called and whether it can be trained at all; null
    # where the config has no model group to read it from (fairseq-validate: see
    # CounterFalseNegativeLoss._check_model_class)
    arch: Optional[str] = II("oc.select:model._name,null")


def _resolved(value):
    """None for an interpolation left unresolved (a config built in code, outside fairseq)."""
    return None if isinstance(value, str) and value.startswith("${") else value


@dataclass
class MaskedLMStep:
    """One step as a subclass's :meth:`CounterFalseNegativeLoss.objective` sees it. S is the
    number of selected positions (M masked positions, or B * N static slots)."""

    net: Dict[str, torch.Tensor]  # the model's outputs (models/objectives.py)
    sel: object  # the selection (models/selection.py)
    src_tokens: torch.Tensor  # B x T masked input
    target: torch.Tensor  # B x T gold ids at the masked positions, padding elsewhere
    gold: torch.Tensor  # S gold ids (padding: a slot with nothing to predict)
    valid: torch.Tensor  # S bool: gold is not padding
    nll: torch.Tensor  # S fp32 -log p(gold), 0 where not valid
    synonym: torch.Tensor  # S bool: the argmax is a WordNet synonym of a whole-word gold token


# a loss term: (logged name, weight, summed value); the loss is sum(weight * value)
Term = Tuple[str, float, torch.Tensor]


class CounterFalseNegativeLoss(FairseqCriterion):
    """Masked-LM loss plus a counter-false-negative term (see subclasses)."""

    requires_table = False
    # every logged value is a sum over the update's samples (or weighted by the number of
    # updates, ``updates``): fairseq-train reduces them once per --log-interval, summed on the
    # device (compat/device_stats.py)
    summed_statistics = True
    requires_discriminator = False
    # extra model outputs the objective reads (models/objectives.py OUTPUTS)
    model_outputs: Tuple[str, ...] = ()

    def __init__(self, cfg: SynonymCriterionConfig, task):
        super().__init__(task)
        self.cfg = plain_config(cfg)  # read inside every step: plain values, nothing to trace
        # unresolved only for a config built in code, outside fairseq: then the task's own value
        mask_prob = (
            cfg.mask_prob
            if _resolved(cfg.mask_prob) is not None
            else getattr(task.cfg, "mask_prob", None)
        )
        self.mask_prob = None if mask_prob is None else float(mask_prob)
        self.fairseq_roberta, self.has_discriminator = self._check_model_class(cfg)
        self.synonym_record = None  # the table's record in checkpoints (tables.table_record)
        if self.requires_table:
            needs_pairs = f"--criterion {self.criterion_name()}"
        elif cfg.electra_rtd_synonym_policy != "replaced":
            needs_pairs = f"--electra-rtd-synonym-policy {cfg.electra_rtd_synonym_policy}"
        else:
            needs_pairs = None
        if cfg.synonym_table:
            self.lookup: Optional[SynonymLookup]
            self.lookup, self.synonym_record = load_synonym_lookup(
                cfg.synonym_table, task, needs_pairs
            )
        elif self.requires_table:
            raise FlagError(
                f"--criterion {self.criterion_name()} needs --synonym-table FILE: build one for "
                "DATA/dict.txt with `python scripts/build_synonym_table.py --dict DATA/dict.txt "
                "--tokenizer ... --output DATA/synonyms.npz`"
            )
        else:
            self.lookup = None
        if cfg.electra_rtd_synonym_policy != "replaced" and self.lookup is None:
            raise FlagError(
                f"--electra-rtd-synonym-policy {cfg.electra_rtd_synonym_policy} needs --synonym-table "
                "FILE (which replacements are synonyms); without a table only the default 'replaced' "
                "applies"
            )
        d = task.source_dictionary
        # masked entries the statistics count as words: ordinary entries, not <s> </s> <mask> ...
        self.nspecial = d.nspecial
        self.mask_idx = d.indices.get("<mask>")
        if cfg.mlm_loss_divisor <= 0:
            raise FlagError(f"--mlm-loss-divisor must be > 0, got {cfg.mlm_loss_divisor}")

    @classmethod
    def criterion_name(cls) -> str:
        return getattr(cls, "_registered_name", cls.__name__)

    # ---- the run's record in its checkpoints (compat/run_records.py) ------------------------
    def checkpoint_record(self) -> dict:
        return {"synonym_table": self.synonym_record}

    def check_checkpoint_record(self, record, checkpoint: str, resumed: bool) -> None:
        check_resumed_table(
            record, self.synonym_record, checkpoint, resumed, self.cfg.synonym_reset_table
        )

    # ---- model checks ------------------------------------------------------------------------
    def _check_model_class(self, cfg) -> Tuple[Optional[bool], Optional[bool]]:
        """From the class the arch names, decide how the model is called; refuse, when the
        criterion is built, a model that cannot be trained with it. Returns (fairseq's own
        RoBERTa, the model detects replaced tokens).

        The arch is the ``--arch`` of the run, read from the config's model group when there is
        one. ``fairseq-validate`` has no ``--arch``: its command-line config has no model group
        (the arch reads as null there, and is not used: the criterion is built from the
        checkpoint's saved config, whose criterion config recorded the arch it was trained with).
        A config can still name none: a checkpoint saved before the criterion config recorded
        the arch (fairseq merges the saved fields into this dataclass, whose default would read
        the saved model config, an argparse namespace for models registered without a dataclass,
        fairseq's RoBERTa and the plugin's ``truneg_roberta_*`` and ``bert_*``, which omegaconf
        cannot select into), or a config built in code.
        Then nothing is refused here: both values are None, and the same checks run on the class
        of the model the criterion is first called with (:meth:`_decide_at_first_call`), before
        its first step.
        """
        name = _resolved(cfg.arch) or None
        if name is None:
            self._first_call = self.register_forward_pre_hook(
                self._decide_at_first_call, with_kwargs=True
            )
            return None, None
        model_cls = ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)
        if model_cls is None:
            raise FlagError(
                f"--criterion {self.criterion_name()}: unknown model {name!r} (give --arch; built outside "
                "fairseq-train, set the config's arch to the model's arch name)"
            )
        return self._check_class(model_cls, f"--arch {name} ({model_cls.__name__})", name)

    def _decide_at_first_call(self, _criterion, args, kwargs):
        """Forward pre-hook, installed only when the arch was unknown at build time: decide from
        the class of the model the criterion is first called with, unwrapped from data-parallel
        wrappers (``.module``), then remove itself. fairseq calls a criterion as
        ``criterion(model, sample)``, so the step itself is unchanged."""
        model = args[0] if args else kwargs["model"]
        while isinstance(getattr(model, "module", None), torch.nn.Module):
            model = model.module
        cls = type(model)
        # the arch the model was built as, for the suggestions of the messages (fairseq's legacy
        # models keep their arguments as ``args``)
        name = str(getattr(getattr(model, "args", None), "arch", None) or cls.__name__)
        self.fairseq_roberta, self.has_discriminator = self._check_class(
            cls, f"the model ({cls.__name__})", name
        )
        self._first_call.remove()
        logger.info(
            f"--criterion {self.criterion_name()}: the config names no arch; the model is a "
            f"{cls.__name__} ({'fairseq RoBERTa forward' if self.fairseq_roberta else 'plugin forward'}"
            f"{', with replaced-token detection' if self.has_discriminator else ''})"
        )

    def _check_class(self, model_cls, what: str, name: str) -> Tuple[bool, bool]:
        """The checks of :meth:`_check_model_class` on ``model_cls`` (``what`` names it in the
        messages, ``name`` is its arch)."""
        cfg = self.cfg
        crit = f"--criterion {self.criterion_name()}"
        works = (
            "fairseq's roberta_* archs with --task masked_lm (hard correction only), the plugin's "
            "truneg_roberta_* and bert_hf_* archs with --task masked_lm, or its electra_* archs with "
            "--task electra"
        )
        if issubclass(model_cls, MaskedLMObjectives):
            fairseq_roberta = False
        elif issubclass(model_cls, RobertaModel):
            fairseq_roberta = True
            need = [o for o in self.model_outputs if not o.endswith("_grad")]
            if need:
                raise FlagError(
                    f"{crit} needs the model's forward to return {' and '.join(need)} as well as the "
                    f"masked-LM logits; fairseq's {what} returns the logits only. Use "
                    f"--arch truneg_{name} (the same RoBERTa: same weights, sizes and checkpoint "
                    "keys, so --restore-file and fine-tuning work unchanged)"
                    if name.startswith("roberta_")
                    else f"{crit} needs {' and '.join(need)} from the model's forward, which {what} does not "
                    f"return; use {works}"
                )
            if cfg.mlm_prediction_slots == "static":
                raise FlagError(
                    f"--mlm-prediction-slots static needs the plugin's forward (positions given as slots); "
                    f"{what} takes boolean masks only: use --arch truneg_{name} or the default dynamic slots"
                )
        else:
            raise FlagError(f"{crit} needs a masked-LM model ({works}); got {what}")
        has_disc = issubclass(model_cls, ReplacedTokenDetection)
        if self.requires_discriminator and not has_disc:
            raise FlagError(
                f"{crit} needs an ELECTRA model (--arch electra_small, electra_base, electra_large with "
                f"--task electra); got {what}"
            )
        changed = rtd.changed_electra_flags(cfg)
        if changed and not has_disc:
            raise FlagError(
                f"{', '.join(changed)} only appl{'ies' if len(changed) == 1 else 'y'} to ELECTRA "
                f"(a model with a discriminator); {what} has none: remove the flag "
                "or use --task electra --arch electra_*"
            )
        if has_disc and self.mask_prob is None:
            raise FlagError(
                f"{crit} on a model with a discriminator needs a task with --mask-prob (--task electra)"
            )
        return fairseq_roberta, has_disc

    # ---- the step ----------------------------------------------------------------------
    def select(self, target: torch.Tensor):
        """The positions the masked-LM head predicts (see :mod:`truneg_fairseq.models.selection`)."""
        masked = target.ne(self.padding_idx)  # B x T
        if self.cfg.mlm_prediction_slots == "static":
            n = static_slot_count(target.size(1), self.mask_prob, self.cfg.mlm_max_predictions)
            return SlotSelection(masked, n)
        return MaskSelection(masked)

    def model_output_names(self) -> Tuple[str, ...]:
        return self.model_outputs

    def run_model(self, model, sample, sel) -> Dict[str, torch.Tensor]:
        """The one call of the model's forward in a step."""
        net_input, target = sample["net_input"], sample["target"]
        if self.fairseq_roberta:
            # fairseq's RoBERTa masked-LM forward: logits at the masked positions, nothing else
            logits = model(**net_input, **sel.forward_kwargs())[0]  # M x V
            return {"mlm_logits": logits, "mlm_pred": logits.detach().argmax(dim=-1)}
        return model(
            **net_input,
            **sel.forward_kwargs(),
            mlm_targets=target,
            mlm_outputs=self.model_output_names(),
        )

    def forward(self, model, sample, reduce=True):
        target = sample["target"]  # B x T, padding outside the masked positions
        src_tokens = sample["net_input"]["src_tokens"]  # B x T
        sel = self.select(target)
        net = self.run_model(model, sample, sel)

        gold = sel.take(target)  # S
        valid = gold.ne(self.padding_idx)  # S
        sample_size = valid.sum()
        nll = losses.masked_nll(net["mlm_logits"], gold, self.padding_idx)  # S
        pred = net["mlm_pred"]  # S
        original = torch.where(target.ne(self.padding_idx), target, src_tokens)  # B x T
        whole = None
        if self.lookup is not None:
            whole = sel.take(
                self.lookup.ends_word(original)
            )  # S: subword pieces are never corrected
            synonym = valid & fn.synonym_predictions(
                gold, pred, self.lookup.is_synonym(gold, pred), whole
            )  # S
        else:
            synonym = torch.zeros_like(valid)
        step = MaskedLMStep(net, sel, src_tokens, target, gold, valid, nll, synonym)
        terms, stats = self.objective(step)
        if self.has_discriminator:
            syn_sample = None
            if self.lookup is not None:
                syn_sample = sel.put(
                    torch.zeros_like(target, dtype=torch.bool),
                    valid & whole & self.lookup.is_synonym(gold, net["rtd_sampled"]),
                )
            rtd_sum, rtd_stats = rtd.rtd_term(
                net, original, self.padding_idx, syn_sample, self.cfg.electra_rtd_synonym_policy
            )
            gen_w = self.cfg.electra_gen_weight
            terms = [(name, gen_w * w, value) for name, w, value in terms]
            # mask_prob x the sum over all tokens = (in expectation) the per-token mean per masked token
            terms.append(("disc_loss", self.cfg.electra_disc_weight, self.mask_prob * rtd_sum))
            stats.update(rtd_stats)
        loss = sum(w * value for _, w, value in terms)

        logging_output = {
            "loss": loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
        }
        word = valid & fn.ordinary_positions(
            gold, self.nspecial, self.mask_idx
        )  # S: masked word positions
        logging_output.update(
            fn.step_counts(
                sel.rows_any,
                word,
                pred.eq(gold),
                valid & ~word,
                target.size(0),
                synonym if self.lookup is not None else None,
                self.lookup.content[pred]
                if self.lookup is not None and self.lookup.has_content
                else None,
            )
        )
        for name, _, value in terms:
            logging_output[name] = value.data
        if sel.dropped is not None:
            logging_output["slots_dropped"] = sel.dropped
        for k, v in stats.items():
            logging_output[k] = v.data if torch.is_tensor(v) else v
        if self.cfg.mlm_loss_divisor != 1.0:
            # the logged values above stay sums; only what fairseq differentiates and divides by
            # is scaled, by the same constant on every worker
            loss = loss / self.cfg.mlm_loss_divisor
            sample_size = sample_size / self.cfg.mlm_loss_divisor
        return loss, sample_size, logging_output

    def objective(self, step: MaskedLMStep) -> Tuple[List[Term], Dict[str, torch.Tensor]]:
        """The loss as named, weighted terms (sums over the batch; the loss is sum(weight *
        value)) and summable statistics to log. The base objective is plain masked-LM (Eq. 1)."""
        return [("mlm_loss", 1.0, step.nll.sum())], {}

    # ---- metrics ---------------------------------------------------------------------
    # every term of the loss is logged as its sum / masked tokens / ln 2 (bits per masked token,
    # fairseq's unit for ``loss``), so the logged loss is the weighted sum of the logged terms
    TERMS = ("mlm_loss", "corrected_loss", "sr_loss", "kl_loss", "disc_loss")

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        def total(key):
            return logs.total(logging_outputs, key)

        sample_size = logs.log_loss_terms(logging_outputs, cls.TERMS)
        if sample_size == 0:
            return
        fn.log_metrics(logging_outputs)  # mlm_acc, syn_acc, the ratios, content_pred, nseq
        if any("slots_dropped" in log for log in logging_outputs):
            # masked positions beyond --mlm-max-predictions (static slots): not in the loss; a
            # mean per update (outputs summed over several updates say how many in ``updates``)
            updates = total("updates") or 1
            metrics.log_scalar("slots_dropped", total("slots_dropped") / updates, updates, round=1)
        if any("sr_dist_sum" in log for log in logging_outputs):
            # the mean cosine distance itself, in [0, 2] (sr_loss is it in the loss's unit)
            metrics.log_scalar("sr_dist", total("sr_dist_sum") / sample_size, sample_size, round=4)
        rtd.reduce_rtd_metrics(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
