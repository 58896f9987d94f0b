#!/usr/bin/env python
"""Original -> transformed results and the drop, as in the paper's Table 5.

  python scripts/robustness_report.py squad --ori dev-v1.1.json pred.json \\
      --trans dev.swap.json pred.swap.json --name "ELECTRA-small HC / SwapSynWordNet"
  python scripts/robustness_report.py glue --ori runs/RTE/train.log --trans runs_swap/RTE/train.log

  python scripts/robustness_report.py contrast --tsv contrast_dev.tsv --pred preds.txt \
      --pair-column pair_id --label-column label

SQuAD: EM/F1 of each predictions file against its own dev file (official normalisation).
GLUE: the best validation accuracy in each fairseq log (examples/glue/finetune.sh writes them).
contrast: a GLUE-format TSV whose rows carry a pair id (an original and its contrast variants
share one) and the predictions for its rows (scripts/glue_predict.py): accuracy and contrast
consistency "Con" (% of groups whose every row is predicted correctly).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail  # noqa: E402


def squad_scores(dev, pred):
    from truneg_fairseq.evaluation.squad_metrics import evaluate

    try:
        with open(dev, encoding="utf-8") as f:
            data = json.load(f)["data"]
        with open(pred, encoding="utf-8") as f:
            preds = json.load(f)
    except (OSError, json.JSONDecodeError, KeyError) as e:
        fail(f"cannot read {dev} / {pred} ({e})")
    r = evaluate(data, preds)
    return {"EM": r["exact_match"], "F1": r["f1"]}


def glue_scores(log):
    from truneg_fairseq.data.glue import parse_validation_log

    if not os.path.isfile(log):
        fail(f"{log} not found")
    acc = [v["accuracy"] for s, v in parse_validation_log(log) if s == "valid" and "accuracy" in v]
    if not acc:
        fail(f"{log} has no validation accuracy")
    return {"Acc": max(acc)}


def contrast_report(args) -> int:
    from truneg_fairseq.evaluation.contrast import contrast_consistency, read_contrast_tsv

    try:
        rows = read_contrast_tsv(args.tsv, args.pair_column, args.label_column)
    except (OSError, ValueError) as e:
        fail(str(e))
    try:
        with open(args.pred, encoding="utf-8") as f:
            preds = [line.rstrip("\n") for line in f]
    except OSError as e:
        fail(f"cannot read --pred {args.pred} ({e})")
    if len(preds) != len(rows):
        fail(
            f"{args.tsv} has {len(rows)} rows but {args.pred} has {len(preds)} predictions: predict the split "
            "prepared from this file (scripts/prepare_glue.py skips malformed rows: see its meta.json)"
        )
    r = contrast_consistency(
        [row[args.pair_column] for row in rows], [row[args.label_column] for row in rows], preds
    )
    print(f"{'model':<30} {'rows':>6} {'groups':>7} {'Acc':>6} {'Con':>6}")
    print(
        f"{args.name:<30} {r['rows']:>6} {r['groups']:>7} {r['accuracy']:>6.1f} {r['consistency']:>6.1f}"
    )
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="kind", required=True)
    sq = sub.add_parser("squad")
    sq.add_argument("--ori", nargs=2, required=True, metavar=("DEV", "PRED"))
    sq.add_argument("--trans", nargs=2, required=True, metavar=("DEV", "PRED"))
    gl = sub.add_parser("glue")
    gl.add_argument("--ori", required=True, metavar="LOG")
    gl.add_argument("--trans", required=True, metavar="LOG")
    co = sub.add_parser("contrast")
    co.add_argument("--tsv", required=True, help="GLUE-format TSV with a header")
    co.add_argument("--pred", required=True, help="one predicted label per data row")
    co.add_argument("--pair-column", default="pair_id")
    co.add_argument("--label-column", default="label")
    for s in (sq, gl, co):
        s.add_argument("--name", default="model")
    args = p.parse_args(argv)
    if args.kind == "contrast":
        return contrast_report(args)
    if args.kind == "squad":
        ori, trans = squad_scores(*args.ori), squad_scores(*args.trans)
    else:
        ori, trans = glue_scores(args.ori), glue_scores(args.trans)
    keys = list(ori)
    print(f"{'model':<30} {'Ori ' + '/'.join(keys):>14} -> {'Trans ' + '/'.join(keys):>16}  drop")
    o = "/".join(f"{ori[k]:.1f}" for k in keys)
    t = "/".join(f"{trans[k]:.1f}" for k in keys)
    d = "/".join(f"{ori[k] - trans[k]:.1f}" for k in keys)
    print(f"{args.name:<30} {o:>14} -> {t:>16}  {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
