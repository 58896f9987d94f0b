"""The study's trainings: the fairseq-train command lines of stage 1 (from scratch) and of the
stage-2 continuations (one learning-rate schedule over both), the word vectors stage 1 starts
from, and running them all, independent ones side by side."""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Tuple

from truneg_fairseq.pipelines.study.run import Runner, default_jobs
from truneg_fairseq.pipelines.study.setting import USER_DIR, Family, Setting, run_id


def train_command(
    setting: Setting,
    family: Family,
    criterion: str,
    data_bin: str,
    table: str,
    save_dir: str,
    stage: int,
) -> List[str]:
    """The fairseq-train command line of a stage-1 run (from scratch) or a stage-2 continuation."""
    s = setting
    total = s.stage1_updates + s.stage2_updates
    cmd = [
        sys.executable,
        "-m",
        "fairseq_cli.train",
        data_bin,
        "--user-dir",
        USER_DIR,
        "--task",
        family.task,
        "--criterion",
        criterion,
        *family.arch,
        "--tokens-per-sample",
        str(s.tokens_per_sample),
        "--sample-break-mode",
        s.break_mode,
        "--num-workers",
        "0",
        "--batch-size",
        str(s.batch_size),
        "--seed",
        str(s.seed),
        "--optimizer",
        "adam",
        "--adam-betas",
        "(0.9,0.98)",
        "--adam-eps",
        "1e-6",
        "--weight-decay",
        "0.01",
        "--clip-norm",
        "1.0",
        "--lr-scheduler",
        "polynomial_decay",
        "--save-dir",
        save_dir,
        "--no-epoch-checkpoints",
        "--log-format",
        "simple",
        "--log-interval",
        "50",
        "--tensorboard-logdir",
        os.path.join(os.path.dirname(os.path.dirname(save_dir)), "tb", os.path.basename(save_dir)),
        "--disable-validation",
    ]
    if stage == 1:
        # one schedule over both stages: warm-up, then linear decay that stage 2 finishes
        cmd += [
            "--lr",
            str(s.lr),
            "--warmup-updates",
            str(s.warmup),
            "--total-num-update",
            str(total),
            "--max-update",
            str(s.stage1_updates),
            "--save-interval-updates",
            str(s.stage1_updates),
        ]
        init = embed_init_flag(family)
        if s.embed_init and init is not None:
            cmd += [init[0], vectors_path(data_bin, init[1])]
    else:
        lr = s.lr * (total - s.stage1_updates) / (total - s.warmup)
        cmd += [
            "--lr",
            f"{lr:.6g}",
            "--warmup-updates",
            "0",
            "--total-num-update",
            str(s.stage2_updates),
            "--max-update",
            str(s.stage2_updates),
            "--save-interval-updates",
            str(s.save_interval()),
            "--keep-interval-updates",
            "-1",
            "--restore-file",
            os.path.join(os.path.dirname(save_dir), f"{family.name}_stage1", "checkpoint_last.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
        ]
    if s.cpu:
        cmd += ["--cpu"]
    # every criterion of the plugin, the baselines too (mlm_plain, electra), so that each run's
    # log holds the ratios; fairseq's own masked_lm takes no table
    if criterion != "masked_lm":
        cmd += ["--synonym-table", table]
    return cmd + list(s.extra_train_args)


def embed_init_flag(family: Family) -> Optional[Tuple[str, int]]:
    """(flag, token-embedding size) of a family whose model starts from word vectors
    (``--truneg-embed-init``: the plugin's RoBERTa; ``--electra-embed-init``: ELECTRA), else None."""
    a = family.arch
    arch = a[a.index("--arch") + 1] if "--arch" in a else ""
    if arch.startswith("truneg_roberta"):
        flag, size_flag, default = "--truneg-embed-init", "--encoder-embed-dim", 768
    elif arch.startswith("electra"):
        flag, size_flag = "--electra-embed-init", "--electra-embed-dim"
        from truneg_fairseq.models.electra_config import ELECTRA_SIZES

        default = ELECTRA_SIZES.get(
            arch, ELECTRA_SIZES["electra_base"]
        ).embed  # --arch electra: base's
    else:
        return None
    return flag, int(a[a.index(size_flag) + 1]) if size_flag in a else default


def vectors_path(data_bin: str, dim: int) -> str:
    return os.path.join(data_bin, f"word_vectors.{dim}.npy")


def write_word_vectors(setting: Setting, work: str, data_bin: str, run: Runner) -> None:
    """Count-based vectors of the training text for every family that starts from them."""
    if not setting.embed_init:
        return
    for dim in sorted({init[1] for init in map(embed_init_flag, setting.families) if init}):
        out = vectors_path(data_bin, dim)
        from truneg_fairseq.data.ppmi_vectors import write_vectors

        # the corpus's split text beside its data-bin (kept by the study's corpus step), and the
        # record there too: a first look in a work folder of its own reuses the vectors
        corpus = os.path.dirname(os.path.abspath(data_bin))
        dict_txt, text = (
            os.path.join(data_bin, "dict.txt"),
            os.path.join(corpus, "raw", "train.txt"),
        )
        cmd = ["truneg-word-vectors", "--dict", dict_txt, "--text", text, "--dim", str(dim)]
        cmd += ["--output", out]
        name, what = f"word_vectors_{dim}", f"{out} (truneg-word-vectors)"
        desc = run.reuse(name, cmd, [out], what, record_dir=corpus)
        if desc is None:
            continue
        # the library function truneg-word-vectors calls, recorded as that command
        run.here(lambda: write_vectors(dict_txt, text, out, dim, 5), cmd, name)
        run.made(name, desc, record_dir=corpus)


def train_all(
    setting: Setting, work: str, data_bin: str, table: str, run: Runner
) -> Dict[str, float]:
    """Stage 1 of every family (side by side), then every continuation (side by side, slowest
    first); returns the training seconds per run."""
    ck = os.path.join(work, "checkpoints")
    jobs = setting.jobs or default_jobs(setting)
    write_word_vectors(setting, work, data_bin, run)
    stage1, made = [], []
    for fam in setting.families:
        save = os.path.join(ck, f"{fam.name}_stage1")
        cmd = train_command(setting, fam, fam.baseline, data_bin, table, save, 1)
        name = f"train_{fam.name}_stage1"
        desc = run.reuse(name, cmd, [save], save)  # reused only when made by this command
        if desc is not None:
            run.log.info(
                f"stage 1: {fam.name} with --criterion {fam.baseline}, {setting.stage1_updates} updates"
            )
            stage1.append((cmd, name))
            made.append((name, desc))
    run.run_many(stage1, jobs)
    for name, desc in made:
        run.made(name, desc)
    stage2, made = [], []
    for fam in setting.families:
        for crit in fam.criteria:
            save = os.path.join(ck, run_id(fam, crit))
            cmd = train_command(setting, fam, crit, data_bin, table, save, 2)
            name = f"train_{run_id(fam, crit)}"
            desc = run.reuse(name, cmd, [save], save)  # its stage 1 checkpoint among the inputs
            if desc is None:
                continue
            run.log.info(
                f"stage 2: {fam.name} continued with --criterion {crit}, {setting.stage2_updates} updates"
            )
            stage2.append((cmd, name))
            made.append((name, desc))
    # sentence-KL runs two encoder passes per step: start it first so the others fill in around it
    stage2.sort(key=lambda job: "mlm_sent_kl" not in job[1])
    run.run_many(stage2, jobs)
    for name, desc in made:
        run.made(name, desc)
    return dict(run.seconds)
