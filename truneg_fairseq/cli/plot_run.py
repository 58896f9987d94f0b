"""The false-negative statistics of one training run over its updates: a table and plots from
its log, for any run (fairseq-train, the recipes, a run of your own).

SOURCE is the run's log -- the stdout of fairseq-train saved to a file, or its --log-file
(examples/glue/finetune.sh writes SAVE_DIR/train.log), in --log-format simple or json -- or the
folder its --tensorboard-logdir named (the recipes: SAVE_DIR/tb). The table has a row per logged
update for training (each --log-interval) and for each validation: the loss (bits; the MLM part
where the criterion logs one), MLM accuracy, synonym-aware accuracy, the prediction- and
iteration-level correction ratios and the share of content-word predictions (what the
criterion logs; docs/criterions.md). It is printed and written to OUT/ratios.md and
OUT/ratios.csv; with matplotlib installed OUT/ratios.png and OUT/losses.png plot it as the study
plots its runs.

TensorBoard shows the same events: pip install tensorboard; tensorboard --logdir SAVE_DIR/tb

Examples:
  truneg-plot-run checkpoints/truneg_roberta_base_mlm_hard_correction/tb --out plots/hc
  fairseq-train ... --log-format simple | tee train.out; truneg-plot-run train.out
"""

import argparse
import os

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import fail, interruptible, setup_logging


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    p.add_argument("source", metavar="SOURCE", help="a fairseq log file or tensorboard folder")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where the table and plots go (default: a folder 'ratios' beside a log file, "
        "inside a tensorboard folder)",
    )
    return p


def _default_out(source: str) -> str:
    source = os.path.abspath(source)
    return os.path.join(source if os.path.isdir(source) else os.path.dirname(source), "ratios")


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    setup_logging("truneg_fairseq.plot_run")
    from truneg_fairseq.data.train_logs import LogReadError, read_training_log
    from truneg_fairseq.outputs import OutputDirError
    from truneg_fairseq.pipelines.run_plot import format_table, run_results, write_run_plot

    try:
        records = read_training_log(args.source)
    except LogReadError as e:
        fail(str(e))
    out = args.out or _default_out(args.source)
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"--out {out} is a file: give a folder")
    results = run_results(records)
    try:
        written = write_run_plot(results, out)
    except (OSError, OutputDirError) as e:
        fail(f"--out {out}: {e}")
    counts = ", ".join(f"{name} {len(by_update)}" for name, by_update in results.items())
    print(f"{args.source}: logged updates per source: {counts}\n")
    print(format_table(written["table"]))
    if len(written["table"]) - 1 > 40:
        print(f"(40 of {len(written['table']) - 1} rows shown; every row is in the files)")
    if written["note"]:
        print(f"\n{written['note']}")
    print("\nwritten: " + ", ".join(written["files"]))
    return 0
