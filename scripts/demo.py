#!/usr/bin/env python
"""The built-in demo: counter-false-negative pre-training on WordNet's own glosses.

1. corpus     WordNet definitions + example sentences (~150k lines) -> train/valid split
2. tokenizer  sentencepiece (unigram, --vocab-size) -> fairseq-preprocess -> data-bin/
3. table      WordNet synonym table for data-bin/dict.txt
4. train      the same small RoBERTa, same seed and masks, same number of updates, with
              fairseq's masked_lm, mlm_hard_correction and mlm_soft_reg; then a small ELECTRA
              with the electra criterion (baseline) and mlm_hard_correction (ELECTRA^HC)
              (tensorboard logs in WORKDIR/tb/<model>_<criterion>)
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
# ELECTRA at the same discriminator size; generator at 1/4 width
SMALL_ELECTRA = [
    "--arch", "electra_small", "--electra-embed-dim", "128", "--electra-hidden-dim", "128",
    "--electra-layers", "4", "--electra-heads", "4", "--electra-ffn-dim", "512",
    "--electra-gen-hidden-dim", "32", "--electra-gen-layers", "4", "--electra-gen-heads", "1",
    "--electra-gen-ffn-dim", "128", "--electra-max-positions", "128", "--tokens-per-sample", "128",
]


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", default="demo_work")
    p.add_argument("--criteria", nargs="+", default=DEFAULT_CRITERIA)
    p.add_argument("--max-update", type=int, default=300, help="updates per RoBERTa run")
    p.add_argument("--electra-criteria", nargs="*", default=["electra", "mlm_hard_correction"])
    p.add_argument("--electra-max-update", type=int, default=150, help="updates per ELECTRA run")
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

    runs = [("roberta", crit, "masked_lm", SMALL_ROBERTA, args.max_update) for crit in args.criteria]
    runs += [("electra", crit, "electra", SMALL_ELECTRA, args.electra_max_update) for crit in args.electra_criteria]
    timings = {}
    for model_name, crit, task, arch, n_updates in runs:
        run_id = f"{model_name}_{crit}"
        log.info(f"[4/5] pre-training {model_name} with --criterion {crit} ({n_updates} updates)")
        save = os.path.join(work, "checkpoints", run_id)
        if os.path.isfile(os.path.join(save, "checkpoint_last.pt")):
            log.info(f"  reusing {save}/checkpoint_last.pt")
            continue
        cmd = [
            sys.executable, "-m", "fairseq_cli.train", data_bin, "--user-dir", os.path.join(REPO, "truneg_fairseq"),
            "--task", task, "--criterion", crit, *arch, "--cpu", "--num-workers", "0",
            "--batch-size", str(args.batch_size), "--max-update", str(n_updates),
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--weight-decay", "0.01",
            "--lr", str(args.lr), "--lr-scheduler", "polynomial_decay", "--warmup-updates", str(max(1, n_updates // 10)),
            "--total-num-update", str(n_updates), "--clip-norm", "1.0", "--seed", "1",
            "--save-dir", save, "--no-epoch-checkpoints", "--log-format", "simple",
            "--log-interval", str(args.log_interval), "--validate-interval-updates", str(n_updates),
            "--max-valid-steps", "20", "--tensorboard-logdir", os.path.join(work, "tb", run_id),
        ]
        if crit not in ("masked_lm", "electra"):
            cmd += ["--synonym-table", table]
        t0 = time.time()
        run(cmd, log, run_id, os.path.join(work, "logs", f"train_{run_id}.log"))
        timings[run_id] = time.time() - t0

    log.info("[5/5] evaluating every checkpoint on the valid split (same masks for all)")
    import logging

    for name in ("fairseq", "truneg_fairseq.criterions"):
        logging.getLogger(name).setLevel(logging.WARNING)
    header = ["model", "criterion", "valid MLM loss (bits)", "MLM acc %", "pred-level corr %", "iter-level corr %",
              "RTD acc %", "train s"]
    lines = ["\t".join(header)]
    first = None
    for model_name, crit, _, _, n_updates in runs:
        run_id = f"{model_name}_{crit}"
        r = evaluate_mlm(os.path.join(work, "checkpoints", run_id, "checkpoint_last.pt"), data_bin, table, seed=1)
        first = first or r
        lines.append("\t".join([
            f"{model_name} ({n_updates} upd)", crit, f"{r['mlm_loss']:.3f}", f"{r['mlm_acc']:.2f}",
            f"{r['pred_corr_ratio']:.3f}", f"{r['iter_corr_ratio']:.3f}",
            f"{r['disc_acc']:.2f}" if "disc_acc" in r else "-",
            f"{timings[run_id]:.0f}" if run_id in timings else "reused",
        ]))
    with atomic_open(os.path.join(work, "results.tsv")) as f:
        f.write("\n".join(lines) + "\n")

    widths = [max(len(l.split("\t")[i]) for l in lines) for i in range(len(header))]
    print()
    print(f"Demo on WordNet glosses, batches of {args.batch_size} x 128 tokens; valid split: "
          f"{first['masked_tokens']} masked tokens in {first['sentences']} blocks (ELECTRA masks 85/15/0, RoBERTa 80/10/10)")
    for i, l in enumerate(lines):
        print("  ".join(c.ljust(w) for c, w in zip(l.split("\t"), widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("\ncorrection ratios: % of mispredicted masked tokens whose prediction is a WordNet synonym of the gold "
          "token (pred-level) and % of blocks with at least one (iter-level); ELECTRA rows: the generator")
    print(f"tensorboard --logdir {os.path.join(work, 'tb')}    results: {os.path.join(work, 'results.tsv')}")
    print(f"total {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
