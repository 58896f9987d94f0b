"""Gather GLUE fine-tuning runs into one Table-3-style row (per task + average).

Reads RUNS/TASK/train.log (written by examples/glue/finetune.sh) for every task present, takes
the validation epoch with the best selection metric of the task and reports, as the ELECTRA and
"true negatives" papers do: CoLA MCC, SST-2 acc, MRPC acc (F1), STS-B Spearman (Pearson), QQP acc
(F1), MNLI-m/mm acc, QNLI acc, RTE acc; the average uses MNLI-m.

Example:
  truneg-glue-table checkpoints/glue --name "ELECTRA-small HC"
"""

import argparse
import sys

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import interruptible


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__, register=False)  # logs only: fairseq is not needed
    p.add_argument("runs", help="folder holding one sub-folder per task (with train.log)")
    p.add_argument("--name", default="model", help="row label")
    return p


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    from truneg_fairseq.pipelines.glue import format_row, glue_row

    cols, vals, warnings = glue_row(args.runs)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not cols:
        print(
            f"error: no RUNS/TASK/train.log with validation results under {args.runs}",
            file=sys.stderr,
        )
        return 2
    print(format_row(args.name, cols, vals))
    return 0
