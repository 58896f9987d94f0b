"""Base criterion for counter-false-negative masked-LM training.

Each step calls the (possibly wrapped) model exactly once, ``model(**net_input, masked_tokens
or mlm_positions, mlm_targets, mlm_outputs)``, and reads only the dict it returns
(:mod:`truneg_fairseq.models.objectives`): what torch's DistributedDataParallel runs in its
``forward`` is what it synchronises. fairseq's own RoBERTa (``--arch roberta_*``) is called
through its masked-LM forward (``model(src_tokens, masked_tokens=M)``), which is enough for the
objectives that need the logits alone.

This is the fairseq front end of the step: the step itself (the objectives' terms, the synonym
lookup of the argmax predictions, ELECTRA's replaced-token-detection term, the logged sums) is
:func:`truneg_fairseq.core.step.masked_lm_step`, which the HF objective calls too. The criterions
(``mlm_plain``, ``mlm_hard_correction``, ``mlm_soft_reg``, ``mlm_sent_kl``, ``electra``, and one for
each objective registered later) are subclasses made by :mod:`.objective_criteria`, each naming its
objective (``entry``, a class of :mod:`truneg_fairseq.core.objectives`: whether it needs a table or
a discriminator, the model outputs it reads, its parameters as config fields). The logged ``loss``
is exactly the weighted sum of the logged terms, all in
one unit (bits per masked token); the false-negative statistics of the paper's Table 2
(``mlm_acc``, ``syn_acc``, ``pred_corr_ratio``, ``iter_corr_ratio``, ``content_pred``, ``nseq``,
``special_masked``) are counted and defined in :mod:`truneg_fairseq.core.statistics`, the one
place that defines them.

When the model detects replaced tokens (ELECTRA), the MLM terms are weighted by
``--electra-gen-weight`` and the replaced-token-detection term is added with
``--electra-disc-weight`` (:mod:`truneg_fairseq.core.replaced_tokens`; its flags in
:mod:`truneg_fairseq.criterions.rtd`).
"""

import logging
from dataclasses import dataclass, field
from typing import Optional, Tuple, Type

import torch
from fairseq.criterions import FairseqCriterion
from fairseq.dataclass import ChoiceEnum
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
from fairseq.models.roberta import RobertaModel
from omegaconf import II

from truneg_fairseq.core import statistics as st
from truneg_fairseq.core.lookup import SynonymLookup
from truneg_fairseq.core.model_outputs import MaskedLMOutputs
from truneg_fairseq.core.objectives import Objective, term_names
from truneg_fairseq.core.objectives.masked_lm import PlainMaskedLM
from truneg_fairseq.core.replaced_tokens import RTDSettings
from truneg_fairseq.core.selection import MaskSelection, SlotSelection, static_slot_count
from truneg_fairseq.core.step import MaskedLMStep, masked_lm_step
from truneg_fairseq.criterions import logs, rtd
from truneg_fairseq.criterions.tables import check_resumed_table, load_synonym_lookup
from truneg_fairseq.errors import FlagError
from truneg_fairseq.models.objectives import MaskedLMObjectives, ReplacedTokenDetection
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


class CounterFalseNegativeLoss(FairseqCriterion):
    """Masked-LM loss plus a counter-false-negative term: the objective ``entry`` (the
    criterions of :mod:`.objective_criteria` name theirs; this base is plain masked LM)."""

    entry: Type[Objective] = PlainMaskedLM
    # every logged value is a sum over the update's samples (or weighted by the number of
    # updates, ``updates``): fairseq-train reduces them once per --log-interval, summed on the
    # device (training/device_stats.py)
    summed_statistics = True

    def __init__(self, cfg: SynonymCriterionConfig, task):
        super().__init__(task)
        self.cfg = plain_config(cfg)  # read inside every step: plain values, nothing to trace
        entry = self.entry
        self.requires_table = entry.needs_table
        self.requires_discriminator = entry.needs_discriminator
        # the objective with its parameters' values (config fields under the owner's prefix)
        self.objective = entry(
            **{p.name: getattr(cfg, entry.prefix + p.name) for p in entry.params}
        )
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
        if self.lookup is None and getattr(type(self), "_registered_name", None):
            # said once: a run without a table can never be compared on the ratios afterwards
            # (the offline scorer, which is not a fairseq criterion, says what it reports itself)
            logger.info(
                f"--criterion {self.criterion_name()} without --synonym-table: syn_acc, "
                "pred_corr_ratio, iter_corr_ratio and content_pred are not logged (give the table "
                "built for this dictionary to log them)"
            )
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
        ordinary = torch.arange(len(d)).ge(d.nspecial)  # V
        if self.mask_idx is not None:
            ordinary[self.mask_idx] = False
        self.register_buffer("ordinary", ordinary, persistent=False)
        # used when the model has a discriminator (has_discriminator)
        self.rtd_settings = RTDSettings(
            float(self.cfg.electra_gen_weight),
            float(self.cfg.electra_disc_weight),
            self.mask_prob,
            self.cfg.electra_rtd_synonym_policy,
        )
        if cfg.mlm_loss_divisor <= 0:
            raise FlagError(f"--mlm-loss-divisor must be > 0, got {cfg.mlm_loss_divisor}")

    @classmethod
    def criterion_name(cls) -> str:
        return getattr(cls, "_registered_name", cls.__name__)

    # ---- the run's record in its checkpoints (compat/resume.py) ------------------------
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
            "fairseq's roberta_* archs with --task masked_lm (mlm_plain and hard correction only), the plugin's "
            "truneg_roberta_* and bert_hf_* archs with --task masked_lm, or its electra_* archs with "
            "--task electra"
        )
        if issubclass(model_cls, MaskedLMObjectives):
            fairseq_roberta = False
        elif issubclass(model_cls, RobertaModel):
            fairseq_roberta = True
            need = [o for o in self.entry.outputs if not o.endswith("_grad")]
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
        """The positions the masked-LM head predicts (see :mod:`truneg_fairseq.core.selection`)."""
        masked = target.ne(self.padding_idx)  # B x T
        if self.cfg.mlm_prediction_slots == "static":
            n = static_slot_count(target.size(1), self.mask_prob, self.cfg.mlm_max_predictions)
            return SlotSelection(masked, n)
        return MaskSelection(masked)

    def model_output_names(self) -> Tuple[str, ...]:
        return self.objective.model_outputs()

    def run_model(self, model, sample, sel) -> MaskedLMOutputs:
        """The one call of the model's forward in a step."""
        net_input, target = sample["net_input"], sample["target"]
        if self.fairseq_roberta:
            # fairseq's RoBERTa masked-LM forward: logits at the masked positions, nothing else
            logits = model(**net_input, **sel.forward_kwargs())[0]  # M x V
            return MaskedLMOutputs(logits, logits.detach().argmax(dim=-1))
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
        cfg = self.cfg
        loss, sample_size, logging_output, step = masked_lm_step(
            net,
            sel,
            src_tokens,
            target,
            self.padding_idx,
            self.objective,
            lookup=self.lookup,
            words=self.ordinary.__getitem__,
            nonpad=src_tokens.ne(self.padding_idx),
            ntokens=sample["ntokens"],
            nsentences=sample["nsentences"],
            dropped=sel.dropped,
            rtd=self.rtd_settings if self.has_discriminator else None,
        )
        self.observe(step)
        if cfg.mlm_loss_divisor != 1.0:
            # the logged values stay sums; only what fairseq differentiates and divides by is
            # scaled, by the same constant on every worker
            loss = loss / cfg.mlm_loss_divisor
            sample_size = sample_size / cfg.mlm_loss_divisor
        return loss, sample_size, logging_output

    def observe(self, step: MaskedLMStep) -> None:
        """Called with each step's tensors (the offline scorer keeps them)."""

    # ---- metrics ---------------------------------------------------------------------
    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        """fairseq's meters over :mod:`truneg_fairseq.core.statistics`' values, in the order of
        fairseq's log line: the loss and its terms, the false-negative counts and ratios, then
        ``slots_dropped``, the objective's own (``sr_dist``) and the discriminator's."""
        # every registered objective's terms the sums hold (a criterion's own, and any other's
        # in sums made elsewhere)
        if logs.log_loss_terms(logging_outputs, term_names()) == 0:
            return
        logs.log_false_negatives(logging_outputs)
        logs.log_scalars(st.step_scalars(st.sum_logs(logging_outputs)))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
