#!/usr/bin/env python
"""Counter-false-negative pre-training over training: the paper's Table 2 (correction ratios at
20/40/60/80/100% of training), the MLM-side effects and Figure-3 cases, from one command.

For each model family (RoBERTa with fairseq's masked_lm task, the plugin's ELECTRA), one plain
first stage from scratch (masked_lm / electra), then the baseline, mlm_hard_correction (HC),
mlm_soft_reg (SR) and mlm_sent_kl (sentence-level KL) each continued from that same checkpoint
for the same number of updates, with checkpoints at 20/40/60/80/100% of the continuation. Every
checkpoint is scored on the same masked valid blocks (for ELECTRA: its generator).

Writes to --out (default WORKDIR/results):
  table2_pred_level.tsv, table2_iter_level.tsv   the paper's Table 2 layout
  progress.tsv                                   every scored checkpoint: valid loss, MLM acc,
                                                 synonym-aware acc, both ratios, content predictions
  ratios.png, losses.png                         the curves over updates (matplotlib)
  cases.txt                                      Figure-3-style cases from the last checkpoints
  results.json                                   all numbers, the setting and the timings
  commands.sh                                    every command run, in order
  summary.md                                     the tables in Markdown, with the machine

Scales (--scale):
  tiny   a few updates of a 2 x 32 model on 2,000 lines (the test suite runs it)
  cpu    4 x 128 RoBERTa (the demo's model, embeddings started from count-based word vectors)
         and ELECTRA (generator 1/2 width) on WordNet's entries and examples, batches of 128
         lines, 1,200 + 500 updates, for 2 CPU cores
  gpu    ELECTRA-small sizes (12 x 256, generator 1/4 width; RoBERTa 12 x 256) with batches of
         512 lines, 20k + 10k updates: for one CUDA GPU (--cpu is dropped)

Example:
  python examples/study/run_study.py --scale cpu --workdir study_work
  python examples/study/run_study.py --scale gpu --workdir study_gpu --input corpus/*.txt
"""

import argparse
import os
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from truneg_fairseq.cli.common import count_arg, fail, setup_logging  # noqa: E402

ROBERTA_CRITERIA = ["masked_lm", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]
ELECTRA_CRITERIA = ["electra", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]

# The study's models, in one place per scale: (RoBERTa flags, ELECTRA flags).
STUDY_ARCHS = {
    "tiny": (
        [
            "--arch",
            "truneg_roberta_base",
            "--encoder-normalize-before",
            "--encoder-layers",
            "2",
            "--encoder-embed-dim",
            "32",
            "--encoder-ffn-embed-dim",
            "64",
            "--encoder-attention-heads",
            "2",
            "--max-positions",
            "128",
        ],
        [
            "--arch",
            "electra_small",
            "--electra-embed-dim",
            "32",
            "--electra-hidden-dim",
            "32",
            "--electra-layers",
            "2",
            "--electra-heads",
            "2",
            "--electra-ffn-dim",
            "64",
            "--electra-gen-hidden-dim",
            "16",
            "--electra-gen-layers",
            "2",
            "--electra-gen-heads",
            "1",
            "--electra-gen-ffn-dim",
            "32",
            "--electra-max-positions",
            "128",
        ],
    ),
    "cpu": (
        [
            "--arch",
            "truneg_roberta_base",
            "--encoder-normalize-before",
            "--encoder-layers",
            "4",
            "--encoder-embed-dim",
            "128",
            "--encoder-ffn-embed-dim",
            "512",
            "--encoder-attention-heads",
            "4",
            "--max-positions",
            "128",
            "--dropout",
            "0",
            "--attention-dropout",
            "0",
        ],
        [
            "--arch",
            "electra_small",
            "--electra-embed-dim",
            "128",
            "--electra-hidden-dim",
            "128",
            "--electra-layers",
            "4",
            "--electra-heads",
            "4",
            "--electra-ffn-dim",
            "512",
            "--electra-gen-hidden-dim",
            "64",
            "--electra-gen-layers",
            "4",
            "--electra-gen-heads",
            "2",
            "--electra-gen-ffn-dim",
            "256",
            "--electra-max-positions",
            "128",
        ],
    ),
    "gpu": (
        [
            "--arch",
            "truneg_roberta_base",
            "--encoder-normalize-before",
            "--encoder-layers",
            "12",
            "--encoder-embed-dim",
            "256",
            "--encoder-ffn-embed-dim",
            "1024",
            "--encoder-attention-heads",
            "4",
            "--max-positions",
            "128",
        ],
        ["--arch", "electra_small", "--electra-max-positions", "128"],
    ),
}
# (stage-1 updates, stage-2 updates, batch size, peak lr, warm-up, corpus lines kept, vocabulary)
SCALES = {
    "tiny": (6, 5, 8, 2e-3, 2, 2000, 2000),
    "cpu": (
        1200,
        500,
        128,
        2e-3,
        100,
        0,
        16000,
    ),  # RoBERTa: the demo's model, with a longer stage 2
    "gpu": (20000, 10000, 512, 1e-3, 1000, 0, 30000),
}


def get_parser():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scale",
        choices=sorted(SCALES),
        default="cpu",
        help="preset sizes and budgets (default cpu)",
    )
    p.add_argument(
        "--workdir", default="study_work", help="data, checkpoints, logs (default study_work)"
    )
    p.add_argument("--out", help="results folder (default WORKDIR/results)")
    p.add_argument(
        "--input", nargs="+", help="your own text files instead of WordNet's entries and examples"
    )
    p.add_argument(
        "--no-embed-init",
        action="store_true",
        help="RoBERTa's stage 1 from random embeddings (default: from count-based word vectors)",
    )
    p.add_argument(
        "--families", nargs="+", choices=["roberta", "electra"], default=["roberta", "electra"]
    )
    p.add_argument("--roberta-criteria", nargs="+", default=ROBERTA_CRITERIA)
    p.add_argument("--electra-criteria", nargs="+", default=ELECTRA_CRITERIA)
    p.add_argument("--stage1-updates", type=int, help="override the scale's stage-1 updates")
    p.add_argument(
        "--stage2-updates", type=int, help="override the scale's updates per continuation"
    )
    p.add_argument(
        "--batch-size", type=int, help="override the scale's batch size (lines, one sample each)"
    )
    p.add_argument("--lr", type=float, help="override the scale's peak learning rate")
    p.add_argument("--vocab-size", type=int, help="override the scale's dictionary size (words)")
    p.add_argument(
        "--points",
        type=int,
        default=5,
        help="checkpoints per continuation (default 5: 20/40/60/80/100%%)",
    )
    p.add_argument(
        "--jobs",
        type=count_arg,
        default=0,
        help="trainings and scorings run side by side (default 0: one per CPU core; on a GPU one at a time)",
    )
    p.add_argument("--cases", type=int, default=5, help="Figure-3-style cases kept (default 5)")
    p.add_argument(
        "--no-plots", action="store_true", help="skip the PNG plots (no matplotlib needed)"
    )
    p.add_argument("--force", action="store_true", help="remove WORKDIR first")
    p.add_argument(
        "--train-args", default="", help="extra fairseq-train flags for every run, e.g. '--amp'"
    )
    return p


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.pipelines.study")
    from truneg_fairseq.pipelines import study

    s1, s2, bsz, lr, warm, max_lines, vocab = SCALES[args.scale]
    roberta_arch, electra_arch = STUDY_ARCHS[args.scale]
    if args.input:
        missing = [p for p in args.input if not os.path.isfile(p)]
        if missing:
            fail(f"--input {' '.join(missing)}: no such file")
    extra = args.train_args.split()
    families = []
    if "roberta" in args.families:
        families.append(
            study.Family(
                "roberta", "masked_lm", roberta_arch, "masked_lm", list(args.roberta_criteria)
            )
        )
    if "electra" in args.families:
        families.append(
            study.Family("electra", "electra", electra_arch, "electra", list(args.electra_criteria))
        )
    setting = study.Setting(
        vocab_size=args.vocab_size or vocab,
        batch_size=args.batch_size or bsz,
        lr=args.lr or lr,
        warmup=warm,
        stage1_updates=args.stage1_updates or s1,
        stage2_updates=args.stage2_updates or s2,
        points=args.points,
        families=families,
        extra_train_args=extra,
        max_lines=max_lines,
        cpu=args.scale != "gpu",
        embed_init=not args.no_embed_init,
        jobs=args.jobs,
    )
    work = os.path.abspath(args.workdir)
    if args.force and os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work, exist_ok=True)
    out = os.path.abspath(args.out or os.path.join(work, "results"))
    t0 = time.time()
    run = study.Runner(work, log)
    data_bin, table = study.prepare_data(work, setting, run, args.input)
    unk = study.unknown_rates(data_bin)
    study.train_all(setting, work, data_bin, table, run)
    scores = study.score_all(setting, work, data_bin, table, args.cases, log)
    results, cases, meta = scores.reports, scores.cases, scores.meta()
    machine = study.machine_description(args.scale == "gpu")
    meta.update(
        unk_rate=unk,
        setting=study.asdict(setting),
        train_seconds=run.seconds,
        machine=machine,
        scale=args.scale,
        wall_seconds=time.time() - t0,
    )
    study.write_results(out, results, cases, meta)
    run.write_commands(os.path.join(out, "commands.sh"))
    plots = [] if args.no_plots else study.plot(out, results)
    study.write_summary(os.path.join(out, "summary.md"), results, cases, meta, " ".join(sys.argv))
    print(study.format_rows(study.table2(results, "pred_corr_ratio", "pred-level % at")))
    print()
    print(study.format_rows(study.table2(results, "iter_corr_ratio", "iter-level % at")))
    print()
    print(study.format_rows(study.progress_table(results)))
    print(
        f"\nresults in {out} ({', '.join(os.path.basename(p) for p in plots) or 'no plots'}); machine: {machine}; "
        f"{time.time() - t0:.0f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
