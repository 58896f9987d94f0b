#!/usr/bin/env python
"""The built-in demo: counter-false-negative pre-training on WordNet's own glosses.

1. corpus     WordNet definitions + example sentences (~150k lines) -> train/valid split
2. tokenizer  sentencepiece (unigram, --vocab-size) -> fairseq-preprocess -> data-bin/
3. table      WordNet synonym table for data-bin/dict.txt
4. train      the same small RoBERTa, same seed and masks, same number of updates, with
              fairseq's masked_lm, mlm_hard_correction and mlm_soft_reg (tensorboard logs in
              WORKDIR/tb/<criterion>)
5. evaluate   each final checkpoint on the valid split with identical masks: MLM loss,
              accuracy and the correction ratios; the table is printed and saved to
              WORKDIR/results.tsv

Steps whose outputs exist are reused; --force redoes everything.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli_utils import setup_logging  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CRITERIA = ["masked_lm", "mlm_hard_correction", "mlm_soft_reg"]
SMALL_ROBERTA = [
    "--arch", "roberta_base", "--encoder-layers", "4", "--encoder-embed-dim", "128",
    "--encoder-ffn-embed-dim", "512", "--encoder-attention-heads", "4",
    "--max-positions", "128", "--tokens-per-sample", "128",
]


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", default="demo_work")
    p.add_argument("--criteria", nargs="+", default=DEFAULT_CRITERIA)
    p.add_argument("--max-update", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--log-interval", type=int, default=50)
    p.add_argument("--force", action="store_true", help="rebuild corpus, table and checkpoints")
    return p


def run(cmd, log, prefix, log_path):
    """Run a command, keep its full output in log_path, echo fairseq's progress lines."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        for line in proc.stdout:
            f.write(line)
            if "| train_inner |" in line or "valid on" in line:
                log.info(f"[{prefix}] " + line.split("| INFO | ", 1)[-1].rstrip())
        rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"error: {' '.join(cmd[:4])} ... failed (exit {rc}); see {log_path}")


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.demo")
    from truneg_fairseq.evaluate import evaluate_mlm
    from truneg_fairseq.io_utils import atomic_open

    t_start = time.time()
    work = os.path.abspath(args.workdir)
    data_bin = os.path.join(work, "data-bin")
    table = os.path.join(data_bin, "synonyms.npz")
    if args.force and os.path.isdir(work):
        shutil.rmtree(work)

    log.info("[1/5] corpus + [2/5] tokenizer and binarization")
    if not os.path.isfile(os.path.join(data_bin, "dict.txt")):
        run([sys.executable, os.path.join(REPO, "scripts", "prepare_corpus.py"), "--wordnet-glosses",
             "--output-dir", work, "--vocab-size", str(args.vocab_size)], log, "corpus", os.path.join(work, "logs", "prepare.log"))
    with open(os.path.join(work, "logs", "prepare.log")) as f:
        for line in f:
            if "truneg_fairseq.prepare_corpus" in line:
                log.info("  " + line.split(" | ")[-1].rstrip())

    log.info("[3/5] WordNet synonym table")
    if not os.path.isfile(table):
        run([sys.executable, os.path.join(REPO, "scripts", "build_synonym_table.py"), "--dict", os.path.join(data_bin, "dict.txt"),
             "--tokenizer", "sentencepiece", "--spm-model", os.path.join(work, "spm.model"), "--output", table],
            log, "table", os.path.join(work, "logs", "table.log"))
    with open(os.path.join(work, "logs", "table.log")) as f:
        for line in f:
            if "coverage" in line or "synonym pairs" in line:
                log.info("  " + line.split(" | ")[-1].rstrip())

    timings = {}
    for crit in args.criteria:
        log.info(f"[4/5] pre-training with --criterion {crit} ({args.max_update} updates)")
        save = os.path.join(work, "checkpoints", crit)
        ckpt = os.path.join(save, "checkpoint_last.pt")
        if os.path.isfile(ckpt):
            log.info(f"  reusing {ckpt}")
            continue
        cmd = [
            sys.executable, "-m", "fairseq_cli.train", data_bin, "--user-dir", os.path.join(REPO, "truneg_fairseq"),
            "--task", "masked_lm", "--criterion", crit, *SMALL_ROBERTA, "--cpu", "--num-workers", "0",
            "--batch-size", str(args.batch_size), "--max-update", str(args.max_update),
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--weight-decay", "0.01",
            "--lr", str(args.lr), "--lr-scheduler", "polynomial_decay", "--warmup-updates", str(max(1, args.max_update // 10)),
            "--total-num-update", str(args.max_update), "--clip-norm", "1.0", "--seed", "1",
            "--save-dir", save, "--no-epoch-checkpoints", "--log-format", "simple",
            "--log-interval", str(args.log_interval), "--validate-interval-updates", str(args.max_update),
            "--max-valid-steps", "20", "--tensorboard-logdir", os.path.join(work, "tb", crit),
        ]
        if crit != "masked_lm":
            cmd += ["--synonym-table", table]
        t0 = time.time()
        run(cmd, log, crit, os.path.join(work, "logs", f"train_{crit}.log"))
        timings[crit] = time.time() - t0

    log.info("[5/5] evaluating every checkpoint on the valid split (same masks for all)")
    import logging

    logging.getLogger("fairseq").setLevel(logging.WARNING)
    rows = []
    for crit in args.criteria:
        res = evaluate_mlm(os.path.join(work, "checkpoints", crit, "checkpoint_last.pt"), data_bin, table, seed=1)
        rows.append((crit, res))

    header = ["criterion", "valid MLM loss (bits)", "ppl", "MLM acc %", "pred-level corr %", "iter-level corr %", "train s"]
    lines = ["\t".join(header)]
    for crit, r in rows:
        lines.append("\t".join([crit, f"{r['mlm_loss']:.3f}", f"{r['ppl']:.1f}", f"{r['mlm_acc']:.2f}",
                                f"{r['pred_corr_ratio']:.3f}", f"{r['iter_corr_ratio']:.3f}",
                                f"{timings[crit]:.0f}" if crit in timings else "reused"]))
    with atomic_open(os.path.join(work, "results.tsv")) as f:
        f.write("\n".join(lines) + "\n")

    widths = [max(len(l.split("\t")[i]) for l in lines) for i in range(len(header))]
    print()
    print(f"Demo: small RoBERTa ({args.max_update} updates x {args.batch_size} x 128 tokens) on WordNet glosses; "
          f"valid split, {rows[0][1]['masked_tokens']} masked tokens in {rows[0][1]['sentences']} blocks")
    for i, l in enumerate(lines):
        print("  ".join(c.ljust(w) for c, w in zip(l.split("\t"), widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(f"\ncorrection ratios: % of mispredicted masked tokens whose prediction is a WordNet synonym of the gold "
          f"token (pred-level) and % of blocks with at least one (iter-level)")
    print(f"tensorboard --logdir {os.path.join(work, 'tb')}    results: {os.path.join(work, 'results.tsv')}")
    print(f"total {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
