#!/usr/bin/env python
"""Gather GLUE fine-tuning runs into one Table-3-style row (per task + average).

Reads RUNS/TASK/train.log (written by examples/glue/finetune.sh) for every task present, takes
the validation epoch with the best selection metric of the task and reports, as the ELECTRA and
"true negatives" papers do: CoLA MCC, SST-2 acc, MRPC acc (F1), STS-B Spearman (Pearson), QQP acc
(F1), MNLI-m/mm acc, QNLI acc, RTE acc; the average uses MNLI-m.

Example:
  python scripts/glue_table.py checkpoints/glue --name "ELECTRA-small HC"
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.data.glue import parse_validation_log  # noqa: E402

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


def best_row(task, entries):
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", help="folder holding one sub-folder per task (with train.log)")
    p.add_argument("--name", default="model", help="row label")
    args = p.parse_args(argv)
    cols, vals, scores = [], [], []
    for task in REPORT:
        log = os.path.join(args.runs, task, "train.log")
        if not os.path.isfile(log):
            continue
        r = best_row(task, parse_validation_log(log))
        if r is None or r["score"] is None:
            print(
                f"warning: {log} has no validation line with the {REPORT[task][0]} metric",
                file=sys.stderr,
            )
            continue
        scores.append(r["score"])
        if task == "MNLI":
            cols.append("MNLI-m/mm")
            vals.append(
                f"{r['score']:.1f}/{r['mm']:.1f}"
                if r.get("mm") is not None
                else f"{r['score']:.1f}"
            )
        else:
            cols.append(task)
            vals.append(
                f"{r['score']:.1f}" + (f" ({r['extra']:.1f})" if r["extra"] is not None else "")
            )
    if not cols:
        print(
            f"error: no RUNS/TASK/train.log with validation results under {args.runs}",
            file=sys.stderr,
        )
        return 2
    cols.append("Avg")
    vals.append(f"{sum(scores) / len(scores):.1f}")
    widths = [max(len(c), len(v)) for c, v in zip(cols, vals)]
    name_w = max(len(args.name), len("model"))
    print("model".ljust(name_w) + " | " + " | ".join(c.rjust(w) for c, w in zip(cols, widths)))
    print(args.name.ljust(name_w) + " | " + " | ".join(v.rjust(w) for v, w in zip(vals, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
