"""Scoring the study's checkpoints on the same masked valid blocks (in worker processes on the
CPU, each with the same fixed masks) into typed records (:class:`Scores`), and picking the
cases."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from truneg_fairseq.pipelines.study.report import format_value
from truneg_fairseq.pipelines.study.run import default_jobs, usable_cpus
from truneg_fairseq.pipelines.study.setting import Setting, run_id

if TYPE_CHECKING:
    from truneg_fairseq.evaluation.false_negatives import Case, Counts, Report


_SCORER = None  # the FixedMaskScorer of a scoring worker process


def _start_scorer(args: tuple, threads: int) -> None:
    import torch

    import truneg_fairseq
    from truneg_fairseq.pipelines.scorer import FixedMaskScorer

    global _SCORER
    truneg_fairseq.register()  # a spawned worker: as registered as its parent
    torch.set_num_threads(threads)
    # a spawned worker: warnings and errors in fairseq's format; the parent logs each score.
    # force: importing fairseq ran a logging.basicConfig(level=DEBUG) of its own, whose handler
    # would print every worker's INFO lines raw (INFO:fairseq...), once per worker
    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=logging.WARNING,
        stream=sys.stderr,
        force=True,
    )
    _SCORER = FixedMaskScorer(*args)


def _score_task(task: Tuple[str, int, str, int]):
    return _SCORER.score_checkpoint(task[2], task[3])


@dataclass
class Scores:
    """What :func:`score_all` gives: the reported values of every scored checkpoint, ``reports[run][updates]``
    (update 0 of a continuation: the shared stage-1 checkpoint), the counts they were derived
    from (``counts["run@updates"]``, ``counts["<family>_stage1"]``), the cases and the size of
    the masked valid set."""

    reports: Dict[str, Dict[int, "Report"]]
    counts: Dict[str, "Counts"]
    cases: List["Case"]
    valid_sequences: int
    valid_masked: int

    def meta(self) -> dict:
        return {"valid_blocks": self.valid_sequences, "valid_masked": self.valid_masked}


def score_all(
    setting: Setting,
    work: str,
    data_bin: str,
    table: str,
    num_cases: int = 5,
    log: Optional[logging.Logger] = None,
) -> Scores:
    """Score the stage-1 checkpoint (update 0 of every continuation) and every continuation
    checkpoint, and pick the cases (from the last checkpoints, distinct (gold, prediction)
    pairs, in the order of the runs). On the CPU the checkpoints are scored ``jobs`` at a time,
    each worker with the same fixed masks."""
    import torch

    from truneg_fairseq.evaluation.false_negatives import derive, interval_checkpoints

    device = "cpu" if setting.cpu or not torch.cuda.is_available() else "cuda"
    from truneg_fairseq.pipelines.scorer import FixedMaskConfig

    scorer_args = (
        data_bin,
        table,
        FixedMaskConfig(
            tokens_per_sample=setting.tokens_per_sample,
            break_mode=setting.break_mode,
            seed=setting.seed,
            max_blocks=setting.eval_max_blocks,
            passes=setting.eval_passes,
            device=device,
        ),
    )
    ck = os.path.join(work, "checkpoints")
    tasks: List[Tuple[str, int, str, int]] = []  # (run, updates, checkpoint, cases wanted)
    for fam in setting.families:
        tasks.append(
            (
                f"{fam.name}_stage1",
                0,
                os.path.join(ck, f"{fam.name}_stage1", "checkpoint_last.pt"),
                0,
            )
        )
        for crit in fam.criteria:
            saved = interval_checkpoints(os.path.join(ck, run_id(fam, crit)))
            tasks += [
                (run_id(fam, crit), upd, path, num_cases if upd == max(saved) else 0)
                for upd, path in saved.items()
            ]
    jobs = min(setting.jobs or default_jobs(setting), len(tasks)) if device == "cpu" else 1
    pool, scored = _score_in_workers(tasks, scorer_args, jobs, log)
    family_of = {run_id(fam, crit): fam.name for fam in setting.families for crit in fam.criteria}
    reports: Dict[str, Dict[int, "Report"]] = {}
    counts_of: Dict[str, "Counts"] = {}
    cases, seen = [], set()
    starts = {}
    try:
        for (rid, upd, _, _), got in zip(tasks, scored):
            if rid.endswith("_stage1"):
                starts[rid[: -len("_stage1")]] = got.counts
                counts_of[rid] = got.counts
                continue
            reports.setdefault(rid, {0: derive(starts[family_of[rid]])})[upd] = got.report
            counts_of[f"{rid}@{upd}"] = got.counts
            for c in got.cases:
                if len(cases) < num_cases and (c.gold, c.prediction) not in seen:
                    seen.add((c.gold, c.prediction))
                    cases.append(c)
            if log:
                r = reports[rid][upd]
                log.info(
                    f"scored {rid} update {upd}: loss {r.mlm_loss:.3f} bits, acc {r.mlm_acc:.2f}%, "
                    f"synonym-aware {r.syn_acc:.2f}%, pred-level {r.pred_corr_ratio:.3f}%, "
                    f"iter-level {r.iter_corr_ratio:.2f}% ({r.iter_corr_ratio_512:.2f}% over 512-token units), "
                    f"content predictions {format_value(r.content_pred, '{:.1f}')}%"
                )
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    first = next(iter(counts_of.values()))
    return Scores(reports, counts_of, cases, first.masked_sequences, first.masked)


def _score_in_workers(tasks, scorer_args: tuple, jobs: int, log: Optional[logging.Logger]):
    """(pool or None, an iterator of (counts, cases) in the order of ``tasks``): ``jobs`` worker
    processes, each with its own :class:`FixedMaskScorer` (the same fixed masks), or this
    process when ``jobs`` is 1."""
    if jobs <= 1:
        from truneg_fairseq.pipelines.scorer import FixedMaskScorer

        scorer = FixedMaskScorer(*scorer_args)
        return None, (scorer.score_checkpoint(t[2], t[3]) for t in tasks)

    if log:
        log.info(f"scoring {len(tasks)} checkpoints, {jobs} at a time")
    pool = ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_scorer,
        initargs=(scorer_args, max(1, usable_cpus() // jobs)),
    )
    return pool, pool.map(_score_task, tasks)
