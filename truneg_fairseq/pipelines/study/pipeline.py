"""The whole study from one record (what ``truneg-study`` runs): the setting of a preset scale
with its overrides, then data, trainings, scores and the results folder."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.pipelines.study.presets import (
    ELECTRA_CRITERIA,
    ROBERTA_CRITERIA,
    SCALES,
    STUDY_ARCHS,
)
from truneg_fairseq.pipelines.study.setting import Family, Setting
from truneg_fairseq.pipelines.study.workdir import claim_workdir


@dataclass
class StudyConfig:
    """A study run: the preset ``scale``, what overrides it (None: the scale's value) and where
    everything goes."""

    scale: str = "cpu"
    workdir: str = "study_work"
    out: Optional[str] = None  # results folder (default WORKDIR/results)
    inputs: List[str] = field(default_factory=list)  # text files instead of WordNet's
    embed_init: bool = True  # stage 1 from count-based word vectors
    families: List[str] = field(default_factory=lambda: ["roberta", "electra"])
    roberta_criteria: List[str] = field(default_factory=lambda: list(ROBERTA_CRITERIA))
    electra_criteria: List[str] = field(default_factory=lambda: list(ELECTRA_CRITERIA))
    stage1_updates: Optional[int] = None
    stage2_updates: Optional[int] = None
    batch_size: Optional[int] = None
    lr: Optional[float] = None
    vocab_size: Optional[int] = None
    points: int = 5  # checkpoints per continuation
    jobs: int = 0  # side by side (0: one per CPU core; on a GPU one at a time)
    cases: int = 5  # Figure-3-style cases kept
    plots: bool = True
    force: bool = False  # remove what an earlier run wrote in WORKDIR first
    train_args: List[str] = field(default_factory=list)  # extra fairseq-train flags
    command: str = ""  # the command line, for summary.md


@dataclass
class StudyResult:
    out: str
    results: dict
    plots: List[str]
    machine: str
    seconds: float


def study_setting(cfg: StudyConfig) -> Setting:
    """The :class:`Setting` of ``cfg.scale`` with ``cfg``'s overrides."""
    if cfg.scale not in SCALES:
        raise CorpusError(f"--scale {cfg.scale!r} is not one of {', '.join(sorted(SCALES))}")
    s1, s2, bsz, lr, warm, max_lines, vocab = SCALES[cfg.scale]
    roberta_arch, electra_arch = STUDY_ARCHS[cfg.scale]
    families = []
    if "roberta" in cfg.families:
        families.append(
            Family("roberta", "masked_lm", roberta_arch, "mlm_plain", list(cfg.roberta_criteria))
        )
    if "electra" in cfg.families:
        families.append(
            Family("electra", "electra", electra_arch, "electra", list(cfg.electra_criteria))
        )
    return Setting(
        vocab_size=cfg.vocab_size or vocab,
        batch_size=cfg.batch_size or bsz,
        lr=cfg.lr or lr,
        warmup=warm,
        stage1_updates=cfg.stage1_updates or s1,
        stage2_updates=cfg.stage2_updates or s2,
        points=cfg.points,
        families=families,
        extra_train_args=list(cfg.train_args),
        max_lines=max_lines,
        cpu=cfg.scale != "gpu",
        embed_init=cfg.embed_init,
        jobs=cfg.jobs,
    )


def run_study(cfg: StudyConfig, log: Optional[logging.Logger] = None) -> StudyResult:
    """Corpus, table, word vectors, stage 1 and the continuations, scores, tables, plots and
    the summary under ``cfg.out``; steps of ``cfg.workdir`` made by the same commands from the same inputs are reused."""
    from truneg_fairseq.pipelines import study

    log = log or logging.getLogger("truneg_fairseq.pipelines.study")
    missing = [p for p in cfg.inputs if not os.path.isfile(p)]
    if missing:
        raise CorpusError(f"--input {' '.join(missing)}: no such file")
    setting = study_setting(cfg)
    work = os.path.abspath(cfg.workdir)
    claim_workdir(work, "truneg-study", "--workdir", cfg.force, log)
    out = os.path.abspath(cfg.out or os.path.join(work, "results"))
    t0 = time.time()
    run = study.Runner(work, log)
    data_bin, table = study.prepare_data(work, setting, run, cfg.inputs or None)
    unk = study.unknown_rates(data_bin)
    study.train_all(setting, work, data_bin, table, run)
    scores = study.score_all(setting, work, data_bin, table, cfg.cases, log)
    results, cases, meta = scores.reports, scores.cases, scores.meta()
    machine = study.machine_description(cfg.scale == "gpu")
    meta.update(
        unk_rate=unk,
        setting=asdict(setting),
        train_seconds=run.seconds,
        machine=machine,
        scale=cfg.scale,
        wall_seconds=time.time() - t0,
    )
    study.write_results(out, results, cases, meta)
    run.write_commands(os.path.join(out, "commands.sh"))
    plots = study.plot(out, results) if cfg.plots else []
    study.write_summary(os.path.join(out, "summary.md"), results, cases, meta, cfg.command)
    return StudyResult(out, results, plots, machine, time.time() - t0)
