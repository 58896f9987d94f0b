"""GLUE around fine-tuning: the task folders prepared for fairseq's sentence_prediction
(``truneg-prepare-glue``) and the runs gathered into one Table-3-style row
(``truneg-glue-table``)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from truneg_fairseq.text import TokenizerSpec

logger = logging.getLogger(__name__)


@dataclass
class PrepareGlueConfig:
    glue_dir: str  # folder holding the official task folders
    output_dir: str  # OUT/TASK/{input0,input1,label} written
    dict: str  # the pre-training dict.txt
    tokenizer: TokenizerSpec
    tasks: List[str] = field(default_factory=list)  # empty: every task under glue_dir
    max_skip_fraction: Optional[float] = None  # None: the library's default

    def inputs(self) -> Dict[str, str]:
        """``{flag: path}`` of the run's inputs: none of them may be replaced by its outputs."""
        t = self.tokenizer
        named = {
            "--glue-dir": self.glue_dir,
            "--dict": self.dict,
            "--spm-model": t.spm_model,
            "--gpt2-encoder-json": t.gpt2_encoder_json,
            "--gpt2-vocab-bpe": t.gpt2_vocab_bpe,
            "--vocab": t.vocab,
        }
        return {k: v for k, v in named.items() if v}


def prepare_glue(cfg: PrepareGlueConfig) -> Dict[str, Dict[str, int]]:
    """Tokenize and binarize each task (``cfg.tasks``, or every task whose folder
    ``cfg.glue_dir`` holds: :func:`~truneg_fairseq.data.glue_tasks.select_tasks`) into
    ``cfg.output_dir/TASK`` (one atomic output per task; the run's inputs are never
    replaced); returns the skipped-row counts per task and split. Raises :class:`~truneg_fairseq.errors.CorpusError` (files, rows, tokenizer) and
    :class:`~truneg_fairseq.outputs.OutputDirError` (output directories)."""
    from truneg_fairseq.data.glue_tasks import (
        MAX_SKIP_FRACTION,
        TASKS,
        prepare_task,
        read_task,
        select_tasks,
    )
    from truneg_fairseq.errors import CorpusError
    from truneg_fairseq.outputs import check_dir
    from truneg_fairseq.text import build_tokenizer, check_record

    if not os.path.isfile(cfg.dict):
        raise CorpusError(
            f"--dict {cfg.dict} not found (the dict.txt of the pre-training data-bin)"
        )
    tasks = select_tasks(cfg.glue_dir, cfg.tasks)  # none asked for: those under glue_dir
    tok = build_tokenizer(cfg.tokenizer)
    check_record(cfg.dict, tok)  # the tokenizer that made the pre-training dict.txt, if recorded
    skip = MAX_SKIP_FRACTION if cfg.max_skip_fraction is None else cfg.max_skip_fraction
    # every task's files and output directory are checked before the first is written, so a
    # refusal (a bad RTE file, a foreign directory) leaves no half-prepared set behind
    for name in tasks:
        check_dir(os.path.join(cfg.output_dir, name), "prepare_glue.py")
    read = {name: read_task(TASKS[name], Path(cfg.glue_dir), skip) for name in tasks}
    out = {}
    for name in tasks:
        out[name] = prepare_task(
            TASKS[name],
            cfg.glue_dir,
            cfg.output_dir,
            tok,
            cfg.dict,
            max_skip_fraction=skip,
            inputs=cfg.inputs(),
            read=read.pop(name),
        )
        logger.info(
            f"{name}: written to {os.path.join(cfg.output_dir, name)} "
            f"(skipped rows: {', '.join(f'{k} {v}' for k, v in out[name].items())})"
        )
    return out


# task -> (selection metric, reported metric, extra metric shown in parentheses)
REPORT = {
    "CoLA": ("mcc", "mcc", None),
    "SST-2": ("accuracy", "accuracy", None),
    "MRPC": ("acc_and_f1", "accuracy", "f1"),
    "STS-B": ("pearson_and_spearman", "spearman", "pearson"),
    "QQP": ("acc_and_f1", "accuracy", "f1"),
    "MNLI": ("accuracy", "accuracy", None),
    "QNLI": ("accuracy", "accuracy", None),
    "RTE": ("accuracy", "accuracy", None),
}


def best_row(task: str, entries) -> Optional[dict]:
    """The reported numbers of the validation epoch with the best selection metric."""
    select, report, extra = REPORT[task]
    by_epoch = [v for s, v in entries if s == "valid" and select in v]
    if not by_epoch:
        return None
    i = max(range(len(by_epoch)), key=lambda k: by_epoch[k][select])
    best = by_epoch[i]
    res = {"score": best.get(report), "extra": best.get(extra) if extra else None}
    if task == "MNLI":
        mm = [v for s, v in entries if s == "valid1" and "accuracy" in v]
        res["mm"] = mm[i]["accuracy"] if i < len(mm) else None
    return res


def glue_row(runs: str) -> Tuple[List[str], List[str], List[str]]:
    """(column names, cells, warnings) of RUNS/TASK/train.log for every task present, then "Avg"
    (over the tasks' main scores, MNLI-m for MNLI); no columns when no log has validation
    results. A log without its task's metric is left out with a warning."""
    from truneg_fairseq.data.glue_tasks import parse_validation_log

    cols, vals, scores, warnings = [], [], [], []
    for task in REPORT:
        log = os.path.join(runs, task, "train.log")
        if not os.path.isfile(log):
            continue
        r = best_row(task, parse_validation_log(log))
        if r is None or r["score"] is None:
            warnings.append(f"{log} has no validation line with the {REPORT[task][0]} metric")
            continue
        scores.append(r["score"])
        if task == "MNLI":
            cols.append("MNLI-m/mm")
            mm = f"/{r['mm']:.1f}" if r.get("mm") is not None else ""
            vals.append(f"{r['score']:.1f}{mm}")
        else:
            cols.append(task)
            extra = f" ({r['extra']:.1f})" if r["extra"] is not None else ""
            vals.append(f"{r['score']:.1f}{extra}")
    if cols:
        cols.append("Avg")
        vals.append(f"{sum(scores) / len(scores):.1f}")
    return cols, vals, warnings


def format_row(name: str, cols: List[str], vals: List[str]) -> str:
    """The header line and the row, columns right-aligned."""
    widths = [max(len(c), len(v)) for c, v in zip(cols, vals)]
    name_w = max(len(name), len("model"))
    head = "model".ljust(name_w) + " | " + " | ".join(c.rjust(w) for c, w in zip(cols, widths))
    row = name.ljust(name_w) + " | " + " | ".join(v.rjust(w) for v, w in zip(vals, widths))
    return head + "\n" + row
