"""Continue a local HuggingFace checkpoint on text with a counter-false-negative objective
(``truneg-hf-train``): the pipeline behind the command, one function over one config (what it
reads is loaded and checked by :mod:`truneg_fairseq.hf.loading`).

:func:`run` reads the model directory (nothing is downloaded), checks every input before the
first step (one :class:`HFTrainError` naming the file or flag and the fix), tokenizes the text
(one line, one example), builds or loads the synonym table of the tokenizer, and trains with
:class:`~truneg_fairseq.hf.trainer.TrueNegativeTrainer`: checkpoints every ``save_steps`` in
``output_dir/checkpoint-N`` (``from_pretrained`` loads them), resumed from the last one when the
command is run again, the fairseq statistics in the log (and tensorboard), the final model in
``output_dir``. Under ``torchrun --nproc_per_node K`` the K processes share each update (gloo on
CPU, NCCL on GPUs); ``batch_size`` is per process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from truneg_fairseq.core import objectives
from truneg_fairseq.errors import HFTrainError
from truneg_fairseq.hf.loading import (
    check_architecture,
    check_seq_len,
    load_models,
    local_model_dir,
)
from truneg_fairseq.hf.text_corpus import run_text
from truneg_fairseq.hf.text_inputs import check_run_text

logger = logging.getLogger(__name__)

TABLE_NAME = "synonyms.npz"  # the table built for the run, kept in output_dir for a resume


@dataclass
class HFTrainConfig:
    model_dir: str
    # text files or folders (a path or a list), a save_to_disk directory, or a datasets.Dataset
    train: Any
    output_dir: str
    valid: Any = None
    generator: Optional[str] = None
    objective: str = "hard_correction"
    # the objective's parameters by name (sr_weight, kl_weight, ...; the defaults where absent)
    objective_params: Dict[str, Any] = field(default_factory=dict)
    # a package or .py file of your own objectives, imported before the objective is looked up
    user_dir: Optional[str] = None
    synonym_table: Optional[str] = None
    max_steps: int = 1000
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 5e-5
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seq_len: int = 128
    mask_prob: float = 0.15
    # of the selected tokens: kept / replaced at random; None: BERT's 0.1 / 0.1, or with a
    # generator ELECTRA's 0.15 / 0 (the plugin's --task electra)
    leave_unmasked_prob: Optional[float] = None
    random_token_prob: Optional[float] = None
    max_predictions: Optional[int] = None
    seed: int = 1
    save_steps: int = 500
    save_total_limit: Optional[int] = None
    log_steps: int = 10
    eval_steps: Optional[int] = None
    gen_weight: float = 1.0
    disc_weight: float = 50.0
    rtd_synonym_policy: str = "replaced"
    resume: bool = True
    cpu: bool = False
    report_to: str = "tensorboard"
    workers: int = 0
    allow_fresh_head: bool = False
    # the text as memory-mapped Arrow, tokenized once (hf/text_corpus.py): where the tokens are
    # kept (None: datasets' cache) and by how many processes (None: the cores, up to 8)
    cache_dir: Optional[str] = None
    preprocessing_workers: Optional[int] = None
    streaming: bool = False  # --train read and tokenized as training goes (hf/streamed_text.py)

    def __post_init__(self):
        try:
            if self.user_dir:
                objectives.import_user_dir(self.user_dir)
            objectives.get(self.objective)(**self.objective_params)
        except objectives.ObjectiveError as e:
            raise HFTrainError(f"--objective {self.objective}: {e}") from None
        if objectives.get(self.objective).needs_discriminator and not self.generator:
            raise HFTrainError(
                f"--objective {self.objective} needs an ELECTRA pair: MODEL_DIR the discriminator "
                "and --generator GEN_DIR"
            )
        for flag, value in (
            ("--max-steps", self.max_steps),
            ("--batch-size", self.batch_size),
            ("--grad-accum", self.grad_accum),
            ("--save-steps", self.save_steps),
            ("--log-steps", self.log_steps),
            ("--seq-len", self.seq_len),
        ):
            if value < 1:
                raise HFTrainError(f"{flag} must be >= 1, got {value}")
        if not 0 < self.mask_prob < 1:
            raise HFTrainError(f"--mask-prob must be in (0, 1), got {self.mask_prob}")


def synonym_table(cfg: HFTrainConfig, tok):
    """The table given (checked against the tokenizer), or the one an earlier run kept in
    ``output_dir``, or one built from WordNet (:func:`keep_table` keeps it; None, logged, when
    WordNet is missing and the objective can do without)."""
    from truneg_fairseq.errors import SynonymTableError
    from truneg_fairseq.hf.tokenizer_tables import build_synonym_table, load_synonym_table
    from truneg_fairseq.lexicon import WordNetNotFoundError

    path = cfg.synonym_table or os.path.join(cfg.output_dir, TABLE_NAME)
    if cfg.synonym_table or os.path.isfile(path):
        flag = "--synonym-table" if cfg.synonym_table else "the table of an earlier run,"
        try:
            return load_synonym_table(path, tok, flag)
        except SynonymTableError as e:
            raise HFTrainError(str(e)) from None
    needed = objectives.get(cfg.objective).needs_table or cfg.rtd_synonym_policy != "replaced"
    logger.info(
        f"building the WordNet synonym table of the tokenizer's {len(tok)}-entry vocabulary "
        f"(once: kept as {path} for a resume; --synonym-table FILE gives one built before)"
    )
    try:
        table, _ = build_synonym_table(tok)
    except WordNetNotFoundError as e:
        if needed:
            raise HFTrainError(f"{e}; or give --synonym-table FILE") from None
        logger.warning(f"no synonym table ({e}): syn_acc and the correction ratios are not logged")
        return None
    return table  # kept in output_dir by keep_table once the run starts


def keep_table(cfg: HFTrainConfig, table) -> None:
    """Keep a table built for the run in ``output_dir`` (a resume reads it back)."""
    path = os.path.join(cfg.output_dir, TABLE_NAME)
    if table is not None and not cfg.synonym_table and not os.path.isfile(path):
        if is_main_process():
            table.save(path)


def finished_run(cfg: HFTrainConfig, last: Optional[str]) -> bool:
    """Whether ``last`` (the checkpoint a run would resume from) already holds ``--max-steps``
    updates: the run is over and another one would add an update; logged in one line."""
    if not last:
        return False
    from truneg_fairseq.hf.output_dir import global_step

    step = global_step(last)  # a whole number: last_checkpoint checked it
    if step < cfg.max_steps:
        return False
    logger.info(
        f"{cfg.output_dir} holds a finished run: {last} is at update {step} (--max-steps "
        f"{cfg.max_steps}); nothing to do (a larger --max-steps goes on, --no-resume starts afresh)"
    )
    return True


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


# ---- the output directory -----------------------------------------------------------------------
def check_inputs(cfg: HFTrainConfig) -> None:
    """Every input path named by the command, before any work (a missing --train is said before
    the synonym table is built, not after)."""
    check_architecture(
        local_model_dir(cfg.model_dir, "MODEL_DIR"), cfg.generator, cfg.allow_fresh_head
    )
    if cfg.generator:
        local_model_dir(cfg.generator, "--generator")
    check_run_text(cfg)
    if cfg.synonym_table and not os.path.isfile(cfg.synonym_table):
        raise HFTrainError(
            f"--synonym-table {cfg.synonym_table} not found (build one: truneg-hf-train "
            "MODEL_DIR --build-synonyms FILE, or leave the flag out to build it from WordNet)"
        )


# ---- the run ----------------------------------------------------------------------------------
def build_objective(cfg: HFTrainConfig, tok, mlm, disc, table):
    from truneg_fairseq.hf.electra_pair import ElectraPretraining
    from truneg_fairseq.hf.objective import TrueNegativeMLM

    kw = dict(cfg.objective_params)
    try:
        if disc is None:
            return TrueNegativeMLM(mlm, tok, cfg.objective, table, **kw)
        return ElectraPretraining(
            mlm, disc, tok, cfg.objective, table, mask_prob=cfg.mask_prob,
            gen_weight=cfg.gen_weight, disc_weight=cfg.disc_weight,
            rtd_synonym_policy=cfg.rtd_synonym_policy, **kw,
        )  # fmt: skip
    except ValueError as e:  # ModelError, ObjectiveError and the checks of the objective
        raise HFTrainError(str(e)) from None


def training_arguments(cfg: HFTrainConfig):
    from transformers import TrainingArguments

    evaluate = bool(cfg.valid and cfg.eval_steps)
    return TrainingArguments(
        output_dir=cfg.output_dir,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        max_steps=cfg.max_steps,
        logging_steps=cfg.log_steps,
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        eval_strategy="steps" if evaluate else "no",
        eval_steps=cfg.eval_steps if evaluate else None,
        seed=cfg.seed,
        use_cpu=cfg.cpu,
        # gloo between CPU processes (torchrun sets WORLD_SIZE); one process has no backend
        ddp_backend="gloo" if cfg.cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        report_to=[] if cfg.report_to == "none" else [cfg.report_to],
        dataloader_num_workers=cfg.workers,
        dataloader_pin_memory=not cfg.cpu,
        disable_tqdm=not sys.stderr.isatty(),
    )


def _log_line(logs: dict, step: int) -> str:
    """One fairseq-style line: ``name value | ...``."""
    parts = [f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in logs.items()]
    return " | ".join(parts + [f"num_updates {step}"])


def run(cfg: HFTrainConfig) -> str:
    """Train; returns the output directory (the final model is saved there). Every input is
    checked first; the process that writes (rank 0) holds the output directory's lock
    (:func:`truneg_fairseq.outputs.output_lock`) for the whole run."""
    from truneg_fairseq.hf import output_dir as outdir
    from truneg_fairseq.outputs import output_lock

    check_inputs(cfg)
    with output_lock(cfg.output_dir) if is_main_process() else contextlib.nullcontext():
        outdir.claim(cfg.output_dir, outdir.run_inputs(cfg), cfg.resume)
        out = _train(cfg)
    close_process_group()
    return out


def close_process_group() -> None:
    """End the processes' group (torchrun) once the run is over: a gloo or NCCL group left to the
    interpreter's exit can abort a process after its work is done (``terminate called without an
    active exception``, exit -6), which torchrun reports as a failed job."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()  # every process has saved and logged
        dist.destroy_process_group()


def _train(cfg: HFTrainConfig) -> str:
    from transformers import PrinterCallback, TrainerCallback

    if not is_main_process():  # under torchrun the start-up lines come from rank 0 alone
        for name in (__name__, "truneg_fairseq.hf"):
            logging.getLogger(name).setLevel(logging.WARNING)

    from truneg_fairseq.hf import output_dir as outdir
    from truneg_fairseq.hf.collator import MaskedLMCollator
    from truneg_fairseq.hf.run_record import run_settings
    from truneg_fairseq.hf.trainer import TrueNegativeTrainer

    outdir.refuse_unowned(cfg.output_dir)  # a listed name that is not the run's: before any work
    if cfg.resume and finished_run(cfg, outdir.last_checkpoint(cfg.output_dir)):
        return cfg.output_dir
    tok, mlm, disc = load_models(cfg)
    models = [(cfg.generator or cfg.model_dir, mlm)]
    check_seq_len(cfg, models + ([(cfg.model_dir, disc)] if disc is not None else []))
    train, valid = run_text(cfg, tok)
    table = synonym_table(cfg, tok)
    objective = build_objective(cfg, tok, mlm, disc, table)
    keep, rand = (0.15, 0.0) if disc is not None else (0.1, 0.1)
    keep = keep if cfg.leave_unmasked_prob is None else cfg.leave_unmasked_prob
    rand = rand if cfg.random_token_prob is None else cfg.random_token_prob
    args = training_arguments(cfg)
    settings = run_settings(cfg, table, args.world_size, keep, rand)
    last = outdir.resume_point(cfg, settings)
    if is_main_process():
        outdir.mark(cfg.output_dir)  # the run marker first: the directory is this run's
    keep_table(cfg, table)
    collator = MaskedLMCollator(
        tok,
        mask_prob=cfg.mask_prob,
        leave_unmasked_prob=keep,
        random_token_prob=rand,
        seed=cfg.seed,
        max_predictions=cfg.max_predictions,
        # streamed: the first process collates every process's batch and accelerate joins them,
        # which needs one width (and gives each process the rows one process would accumulate)
        pad_to_multiple_of=cfg.seq_len if cfg.streaming else None,
    )

    class LogLines(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                logger.info(_log_line(logs, state.global_step))

    trainer = TrueNegativeTrainer(
        model=objective,
        args=args,
        data_collator=collator,
        train_dataset=train,
        eval_dataset=valid,
        processing_class=tok,
        callbacks=[LogLines()],
        run_settings=settings,
    )
    trainer.remove_callback(PrinterCallback)  # the same values as LogLines, as a dict
    if last:
        logger.info(f"resuming from {last}")
    size = len(train) if hasattr(train, "__len__") else "streamed"  # --streaming: no length
    logger.info(
        f"objective {cfg.objective}{' (ELECTRA)' if disc is not None else ''} on "
        f"{type(mlm).__name__}: {size} examples, {cfg.max_steps} updates of "
        f"{cfg.batch_size} x {cfg.grad_accum} x {trainer.args.world_size} sequences"
    )
    trainer.train(resume_from_checkpoint=last)
    evaluated = any(
        "eval_loss" in e and e.get("step") == trainer.state.global_step
        for e in trainer.state.log_history
    )
    if valid is not None and not evaluated:  # --eval-steps dividing --max-steps did it already
        trainer.evaluate()
    with trainer.write_errors(cfg.output_dir, "the final model there is incomplete"):
        trainer.save_model(cfg.output_dir)
    if disc is not None:
        out = cfg.output_dir
        logger.info(
            f"done: the discriminator is in {os.path.join(out, 'discriminator')} "
            f"(ElectraForPreTraining.from_pretrained loads it), the generator in "
            f"{os.path.join(out, 'generator')} (ElectraForMaskedLM; pipeline('fill-mask', ...))"
        )
    else:
        logger.info(f"done: the model is in {cfg.output_dir} (from_pretrained loads it)")
    return cfg.output_dir
