"""Perturbed copies of evaluation files in their original formats (what ``truneg-perturb``
writes): a SQuAD JSON, or a GLUE task folder whose evaluation splits get synonym swaps. The input
is never replaced: an output on the input, or a folder output holding the input, is refused."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass

from truneg_fairseq.errors import CorpusError

logger = logging.getLogger(__name__)


@dataclass
class PerturbConfig:
    input: str  # a SQuAD JSON, or a GLUE task folder
    output: str  # the file / folder written (atomically)
    method: str = "swap_syn_wordnet"  # SQuAD: or "add_sentence_diverse"
    seed: int = 1
    prob: float = 0.1  # swap probability per eligible word
    max_swaps: int = 10  # per text


def _check_not_input(cfg: PerturbConfig) -> None:
    """The output is neither the input nor inside the input folder (the copy would become part
    of the data it was made from)."""
    from truneg_fairseq.outputs import same_file

    out, src = os.path.realpath(cfg.output), os.path.realpath(cfg.input)
    if out == src or same_file(out, src):  # a link to the input, hard links too
        raise CorpusError(
            f"--output {cfg.output} is the input: write the perturbed copy somewhere else"
        )
    if os.path.isdir(src) and out.startswith(src.rstrip(os.sep) + os.sep):
        raise CorpusError(
            f"--output {cfg.output} is inside the input folder {cfg.input}: write the perturbed "
            "copy beside it (e.g. glue_swap/TASK)"
        )


def perturb_squad_file(cfg: PerturbConfig, wn=None) -> dict:
    """The perturbed SQuAD file (validated and repaired as the SQuAD task reads it: skips counted
    and logged); returns the counts of changed contexts."""
    from truneg_fairseq.data import perturbations
    from truneg_fairseq.data.squad_windows import read_squad_file
    from truneg_fairseq.lexicon import load_wordnet
    from truneg_fairseq.outputs import atomic_open

    _check_not_input(cfg)
    wn = wn or load_wordnet()
    data, skipped = read_squad_file(cfg.input)
    if any(skipped.values()):
        logger.info(f"{cfg.input}: {skipped}")
    out, counts = perturbations.perturb_squad(
        data, cfg.method, wn, cfg.seed, cfg.prob, cfg.max_swaps
    )
    with atomic_open(cfg.output, encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    logger.info(
        f"{cfg.method}: {counts['changed']} of {counts['paragraphs']} contexts changed -> "
        f"{cfg.output}"
    )
    return counts


def perturb_glue_folder(cfg: PerturbConfig, task_name: str, wn=None) -> dict:
    """The perturbed copy of a GLUE task folder (train copied, the evaluation splits' text
    columns swapped); returns the texts changed per file. The input folder is passed to the
    output writer: a file of it is never replaced or removed."""
    from truneg_fairseq.data import perturbations
    from truneg_fairseq.data.glue_tasks import TASKS
    from truneg_fairseq.lexicon import load_wordnet
    from truneg_fairseq.outputs import atomic_dir
    from truneg_fairseq.text import read_lines

    _check_not_input(cfg)
    task = TASKS[task_name]
    if not os.path.isdir(cfg.input):
        raise CorpusError(f"{cfg.input} is not a GLUE task folder")
    for _, fname in task.splits:
        if not os.path.isfile(os.path.join(cfg.input, fname)):
            raise CorpusError(f"{os.path.join(cfg.input, fname)} not found")
    wn = wn or load_wordnet()
    changed = {}
    with atomic_dir(cfg.output, "perturb.py glue", inputs={"input": cfg.input}) as tmp:
        for split, fname in task.splits:
            src = os.path.join(cfg.input, fname)
            if split == "train":
                shutil.copyfile(src, os.path.join(tmp, fname))
                continue
            lines = list(read_lines(src))  # any line ending; an over-long line refused
            header = lines[0] if task.header else None
            cols = [
                perturbations.column_index(header, k, src, task)
                for k in (task.sentence1, task.sentence2)
                if k is not None
            ]
            new, changed[fname] = perturbations.perturb_glue_tsv(
                lines, cols, wn, cfg.seed, cfg.prob, cfg.max_swaps, task.header
            )
            with open(os.path.join(tmp, fname), "w", encoding="utf-8", newline="\n") as f:
                f.write("\n".join(new) + "\n")
            logger.info(f"{task_name} {fname}: {changed[fname]} texts changed")
    return changed
