"""Continue a local HuggingFace checkpoint on text with a counter-false-negative objective
(``truneg-hf-train``): the pipeline behind the command, one function over one config.

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

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from truneg_fairseq.hf.objective import OBJECTIVES

logger = logging.getLogger(__name__)

TABLE_NAME = "synonyms.npz"  # the table built for the run, kept in output_dir for a resume


class HFTrainError(ValueError):
    """An input of ``truneg-hf-train`` that cannot be used; the message names it and the fix."""


@dataclass
class HFTrainConfig:
    model_dir: str
    train: str
    output_dir: str
    valid: Optional[str] = None
    generator: Optional[str] = None
    objective: str = "hard_correction"
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
    sr_weight: float = 1.0
    kl_weight: float = 1.0
    kl_grad_original: bool = False
    gen_weight: float = 1.0
    disc_weight: float = 50.0
    rtd_synonym_policy: str = "replaced"
    resume: bool = True
    cpu: bool = False
    report_to: str = "tensorboard"
    workers: int = 0
    allow_fresh_head: bool = False

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise HFTrainError(f"--objective {self.objective!r}: one of {', '.join(OBJECTIVES)}")
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


# ---- inputs -----------------------------------------------------------------------------------
def local_model_dir(path: str, flag: str) -> Path:
    """``path`` as a local HF model directory (config.json inside), else one clear error."""
    p = Path(path)
    if p.is_dir() and (p / "config.json").is_file():
        return p
    if p.is_dir():
        raise HFTrainError(f"{flag} {path} has no config.json: give a save_pretrained directory")
    hub = "/" in path and not p.exists() and not path.startswith((".", "/"))
    raise HFTrainError(
        f"{flag} {path} is not a local model directory"
        + (
            f" (a hub name? download it first: `hf download {path} --local-dir DIR`; this "
            "command never downloads)"
            if hub
            else ""
        )
    )


def text_files(path: str, flag: str) -> List[Path]:
    """A text file, or the .txt files of a folder (sorted)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(q for q in p.rglob("*.txt") if q.is_file())
        if not files:
            raise HFTrainError(f"{flag} {path} is a folder without .txt files")
        return files
    raise HFTrainError(f"{flag} {path} not found (a text file or a folder of .txt files)")


def read_examples(tokenizer, path: str, flag: str, seq_len: int) -> List[List[int]]:
    """Every non-empty line of the text as ids (truncated to ``seq_len``); counts logged."""
    from truneg_fairseq.hf.collator import tokenize_lines
    from truneg_fairseq.text import read_lines

    lines: List[str] = []
    empty = 0
    for f in text_files(path, flag):
        try:
            for line in read_lines(f):
                if line.strip():
                    lines.append(line.strip())
                else:
                    empty += 1
        except UnicodeDecodeError as e:
            raise HFTrainError(f"{flag}: {f} line {e.lineno} is not UTF-8 text") from None
    if not lines:
        raise HFTrainError(f"{flag} {path} holds no text (empty lines only)")
    ids = tokenize_lines(tokenizer, lines, seq_len)
    full = sum(len(x) >= seq_len for x in ids)
    logger.info(
        f"{flag} {path}: {len(ids)} examples (one per non-empty line; {empty} empty lines left "
        f"out, {full} lines cut at --seq-len {seq_len})"
    )
    return ids


class LineDataset:
    """Tokenized lines for ``Trainer``; each item carries its index and the epoch (its mask)."""

    def __init__(self, examples: List[List[int]]):
        self.examples, self.epoch = examples, 0

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return {"input_ids": self.examples[i], "index": i, "epoch": self.epoch}

    def set_epoch(self, epoch):
        self.epoch = int(epoch)


def check_architecture(model_dir: Path, generator: Optional[str]) -> None:
    """Refuse, from config.json, a model that has no masked-LM head to continue."""
    with open(model_dir / "config.json", encoding="utf-8") as f:
        archs = json.load(f).get("architectures") or []
    disc = any(a == "ElectraForPreTraining" for a in archs)
    if disc and not generator:
        raise HFTrainError(
            f"{model_dir} holds ElectraForPreTraining (a discriminator): ELECTRA pre-training "
            "needs its generator too: --generator GEN_DIR (ElectraForMaskedLM)"
        )
    if generator and not disc:
        raise HFTrainError(
            f"--generator is for an ELECTRA discriminator MODEL_DIR; {model_dir} holds "
            f"{', '.join(archs) or 'an unnamed architecture'}"
        )
    if archs and not disc and not any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs):
        raise HFTrainError(
            f"{model_dir} holds {', '.join(archs)}, a model without a masked-LM head: continue "
            "a *ForMaskedLM (or BERT's *ForPreTraining) checkpoint of the same model"
        )


def load_models(cfg: HFTrainConfig):
    """(tokenizer, masked-LM model or generator, discriminator or None), checked."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from truneg_fairseq.hf.collator import TokenizerWithoutMaskError, check_tokenizer

    model_dir = local_model_dir(cfg.model_dir, "MODEL_DIR")
    check_architecture(model_dir, cfg.generator)
    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as e:
        raise HFTrainError(
            f"no tokenizer in {model_dir} ({str(e).splitlines()[0][:160]})"
        ) from None
    try:
        check_tokenizer(tok, f"the tokenizer of {model_dir}")
    except TokenizerWithoutMaskError as e:
        raise HFTrainError(str(e)) from None
    if cfg.generator:
        from transformers import ElectraForMaskedLM, ElectraForPreTraining

        gen_dir = local_model_dir(cfg.generator, "--generator")
        disc = ElectraForPreTraining.from_pretrained(str(model_dir), local_files_only=True)
        mlm, info = ElectraForMaskedLM.from_pretrained(
            str(gen_dir), local_files_only=True, output_loading_info=True
        )
        where = gen_dir
    else:
        disc = None
        mlm, info = AutoModelForMaskedLM.from_pretrained(
            str(model_dir), local_files_only=True, output_loading_info=True
        )
        where = model_dir
    missing = sorted(info.get("missing_keys") or [])
    if missing and not cfg.allow_fresh_head:
        raise HFTrainError(
            f"{where} lacks {len(missing)} weights of {type(mlm).__name__} ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): its masked-LM head would start random. Give "
            "a checkpoint with its head, or pass --allow-fresh-head to train one from scratch"
        )
    return tok, mlm, disc


def synonym_table(cfg: HFTrainConfig, tok):
    """The table given (checked against the tokenizer), or one built from WordNet and kept in
    ``output_dir`` (None, logged, when WordNet is missing and the objective can do without)."""
    from truneg_fairseq.errors import SynonymTableError
    from truneg_fairseq.hf.vocab import build_synonym_table, load_synonym_table
    from truneg_fairseq.lexicon import WordNetNotFoundError

    path = cfg.synonym_table or os.path.join(cfg.output_dir, TABLE_NAME)
    if cfg.synonym_table or os.path.isfile(path):
        flag = "--synonym-table" if cfg.synonym_table else "the table of an earlier run,"
        try:
            return load_synonym_table(path, tok, flag)
        except SynonymTableError as e:
            raise HFTrainError(str(e)) from None
    needed = cfg.objective == "hard_correction" or cfg.rtd_synonym_policy != "replaced"
    try:
        table, _ = build_synonym_table(tok)
    except WordNetNotFoundError as e:
        if needed:
            raise HFTrainError(f"{e}; or give --synonym-table FILE") from None
        logger.warning(f"no synonym table ({e}): syn_acc and the correction ratios are not logged")
        return None
    if is_main_process():
        os.makedirs(cfg.output_dir, exist_ok=True)
        table.save(path)
    return table


def last_checkpoint(output_dir: str) -> Optional[str]:
    """The last complete ``checkpoint-N`` of ``output_dir`` (``trainer_state.json`` is the last
    file ``Trainer`` writes into one); later, incomplete ones (a save cut short) are logged."""
    import re

    if not os.path.isdir(output_dir):
        return None
    found = sorted(
        (int(m.group(1)), name)
        for name in os.listdir(output_dir)
        if (m := re.fullmatch(r"checkpoint-(\d+)", name))
        and os.path.isdir(os.path.join(output_dir, name))
    )
    skipped = []
    for _, name in reversed(found):
        path = os.path.join(output_dir, name)
        if os.path.isfile(os.path.join(path, "trainer_state.json")):
            if skipped:
                logger.warning(
                    f"{len(skipped)} incomplete checkpoint(s) left aside (no trainer_state.json): "
                    + ", ".join(skipped)
                )
            return path
        skipped.append(path)
    return None


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


# ---- the run ----------------------------------------------------------------------------------
def build_objective(cfg: HFTrainConfig, tok, mlm, disc, table):
    from truneg_fairseq.hf.electra import ElectraPretraining
    from truneg_fairseq.hf.heads import ModelError
    from truneg_fairseq.hf.objective import TrueNegativeMLM

    kw = dict(sr_weight=cfg.sr_weight, kl_weight=cfg.kl_weight)
    kw["kl_grad_original"] = cfg.kl_grad_original
    try:
        if disc is None:
            return TrueNegativeMLM(mlm, tok, cfg.objective, table, **kw)
        return ElectraPretraining(
            mlm, disc, tok, cfg.objective, table, mask_prob=cfg.mask_prob,
            gen_weight=cfg.gen_weight, disc_weight=cfg.disc_weight,
            rtd_synonym_policy=cfg.rtd_synonym_policy, **kw,
        )  # fmt: skip
    except (ModelError, ValueError) as e:
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
    """Train; returns the output directory (the final model is saved there)."""
    from transformers import PrinterCallback, TrainerCallback

    if not is_main_process():  # under torchrun the start-up lines come from rank 0 alone
        logger.setLevel(logging.WARNING)

    from truneg_fairseq.hf.collator import MaskedLMCollator
    from truneg_fairseq.hf.trainer import TrueNegativeTrainer

    tok, mlm, disc = load_models(cfg)
    table = synonym_table(cfg, tok)
    objective = build_objective(cfg, tok, mlm, disc, table)
    train = LineDataset(read_examples(tok, cfg.train, "--train", cfg.seq_len))
    valid = (
        LineDataset(read_examples(tok, cfg.valid, "--valid", cfg.seq_len)) if cfg.valid else None
    )
    keep, rand = (0.15, 0.0) if disc is not None else (0.1, 0.1)
    collator = MaskedLMCollator(
        tok,
        mask_prob=cfg.mask_prob,
        leave_unmasked_prob=keep if cfg.leave_unmasked_prob is None else cfg.leave_unmasked_prob,
        random_token_prob=rand if cfg.random_token_prob is None else cfg.random_token_prob,
        seed=cfg.seed,
        max_predictions=cfg.max_predictions,
    )

    class LogLines(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                logger.info(_log_line(logs, state.global_step))

    trainer = TrueNegativeTrainer(
        model=objective,
        args=training_arguments(cfg),
        data_collator=collator,
        train_dataset=train,
        eval_dataset=valid,
        processing_class=tok,
        callbacks=[LogLines()],
    )
    trainer.remove_callback(PrinterCallback)  # the same values as LogLines, as a dict
    last = last_checkpoint(cfg.output_dir) if cfg.resume else None
    if last:
        logger.info(f"resuming from {last}")
    logger.info(
        f"objective {cfg.objective}{' (ELECTRA)' if disc is not None else ''} on "
        f"{type(mlm).__name__}: {len(train)} examples, {cfg.max_steps} updates of "
        f"{cfg.batch_size} x {cfg.grad_accum} x {trainer.args.world_size} sequences"
    )
    trainer.train(resume_from_checkpoint=last)
    evaluated = any(
        "eval_loss" in e and e.get("step") == trainer.state.global_step
        for e in trainer.state.log_history
    )
    if valid is not None and not evaluated:  # --eval-steps dividing --max-steps did it already
        trainer.evaluate()
    trainer.save_model(cfg.output_dir)
    logger.info(f"done: the model is in {cfg.output_dir} (from_pretrained loads it)")
    return cfg.output_dir
