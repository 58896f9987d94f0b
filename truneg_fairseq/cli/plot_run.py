"""The false-negative statistics of training runs over their updates: a table and figures from
their logs, for any run (fairseq-train, truneg-hf-train, the recipes, GLUE and SQuAD fine-tuning,
a run of your own), one run or several compared.

SOURCE is a run's log or tensorboard folder:
  * fairseq-train: its stdout saved to a file, or its --log-file (examples/glue/finetune.sh
    writes SAVE_DIR/train.log), in --log-format simple or json; or the folder its
    --tensorboard-logdir named (the recipes: SAVE_DIR/tb);
  * truneg-hf-train: its stdout saved to a file, or its tensorboard folder (OUTPUT_DIR/runs, or
    OUTPUT_DIR itself).

The table has a row per logged update for training (each logging interval) and for each
validation: the loss (bits: fairseq logs bits, truneg-hf-train's nats are converted; the MLM
part where the criterion logs one), MLM accuracy, synonym-aware accuracy, the prediction- and
iteration-level correction ratios, the share of content-word predictions (what the criterion
logs; docs/criterions.md) and a fine-tuning run's task scores (accuracy, MCC, F1, ...). It is
printed and written to OUT/ratios.md and OUT/ratios.csv. With matplotlib installed, the figures
of what the logs hold: OUT/ratios.png (the correction ratios), OUT/losses.png (loss, MLM and
synonym-aware accuracy), OUT/scores.png (a fine-tuning run's task scores); one colour per
criterion, titles naming the runs and criteria. Several SOURCEs share the table and figures.

OUT holds the outputs of one command line: a run of the same SOURCEs again replaces them; other
SOURCEs, or files this command did not write, are never replaced (give another --out).

TensorBoard shows the same events: pip install tensorboard; tensorboard --logdir SAVE_DIR/tb

Examples:
  truneg-plot-run checkpoints/truneg_roberta_base_mlm_hard_correction/tb --out plots/hc
  fairseq-train ... --log-format simple | tee train.out; truneg-plot-run train.out
  truneg-plot-run runs/hc/tb runs/baseline/tb runs/hf-hc/runs --out plots/compare
"""

import argparse
import os
import re

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import fail, interruptible, setup_logging


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    p.add_argument(
        "sources",
        metavar="SOURCE",
        nargs="+",
        help="a training log file or tensorboard folder; several: one comparison",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where the table and figures go (default for one SOURCE: SOURCE.plots beside it; "
        "required for several)",
    )
    p.add_argument(
        "--label",
        metavar="NAME",
        action="append",
        help="the name of a SOURCE in titles and legends, once per SOURCE in their order "
        "(default: its run folder's or file's name)",
    )
    return p


def default_out(source: str) -> str:
    """``SOURCE.plots`` beside the source: two logs of one folder never share it."""
    return os.path.abspath(source).rstrip(os.sep) + ".plots"


# names a run's log or events folder has whatever the run: the run is named by a folder above
_GENERIC = {"tb", "runs", "train", "log", "logs", "stdout", "out", "output", "events", "valid"}
_HF_RUN_FOLDER = re.compile(
    r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_"
)  # transformers' runs/DATE_HOST


def run_label(source: str) -> str:
    """The name of the run ``source`` logs: its file name without the extension, or the first
    folder above it whose name is not one every run's log has (``tb``, ``runs``, ``train.log``)."""
    parts = os.path.abspath(source).rstrip(os.sep).split(os.sep)
    for i, part in enumerate(reversed(parts)):
        name = part.rsplit(".", 1)[0] if i == 0 and os.path.isfile(source) else part
        if name and name.lower() not in _GENERIC and not _HF_RUN_FOLDER.match(name):
            return name
    return parts[-1] or source


def run_labels(sources) -> list:
    """:func:`run_label` of each source; sources that would share one are named by their paths
    from the folder they have in common instead, so that every legend entry names one run."""
    labels = [run_label(s) for s in sources]
    for label in set(labels):
        same = [i for i, x in enumerate(labels) if x == label]
        if len(same) > 1:
            paths = [os.path.abspath(sources[i]) for i in same]
            common = os.path.commonpath(paths)
            for i, path in zip(same, paths):
                labels[i] = os.path.relpath(
                    path, common if path != common else os.path.dirname(common)
                )
    return labels


@interruptible
def main(argv=None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    log = setup_logging("truneg_fairseq.plot_run")
    from truneg_fairseq.cli.common import refuse_inputs_as_outputs
    from truneg_fairseq.data.train_logs import LogReadError, event_files, read_run
    from truneg_fairseq.outputs import OutputDirError, output_lock, staged_entries
    from truneg_fairseq.pipelines.run_plot import (
        OUTPUTS,
        describe,
        format_table,
        has_values,
        results_of,
        write_run_plot,
    )

    sources = args.sources
    labels = args.label or run_labels(sources)
    if len(labels) != len(sources):
        parser.error(f"--label: {len(labels)} given for {len(sources)} SOURCEs: one per SOURCE")
    if len(sources) > 1 and not args.out:
        fail("several SOURCEs: give --out DIR, the folder of their comparison")
    out = os.path.abspath(args.out or default_out(sources[0]))
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"--out {out} is a file: give a folder")
    # every file read, before anything is read or written: an output on one is refused
    inputs = {}
    for source in sources:
        files = event_files(source) if os.path.isdir(source) else [source]
        inputs.update({f"SOURCE {path}": path for path in files})
    refuse_inputs_as_outputs([("--out", os.path.join(out, name)) for name in OUTPUTS], inputs)

    runs = []
    for source, label in zip(sources, labels):
        try:
            run = results_of(read_run(source), label)
        except LogReadError as e:
            fail(str(e))
        if not has_values(run.by_source):
            fail(
                f"{source}: its records with num_updates hold none of the values this command "
                "shows (loss, accuracies, correction ratios, task scores): give the log of a "
                "training run of fairseq-train or truneg-hf-train"
            )
        runs.append(run)

    # the outputs belong to this command line: another SOURCE's are never replaced
    owner = "truneg-plot-run " + " ".join(os.path.realpath(s) for s in sources)
    try:
        with (
            output_lock(out, log.warning),
            staged_entries(out, owner, OUTPUTS, log.warning, inputs=inputs) as stage,
        ):
            written = write_run_plot(runs, str(stage))
    except (OSError, OutputDirError) as e:
        fail(f"--out {out}: {e}" if str(out) not in str(e) else str(e))
    files = [os.path.join(out, os.path.basename(f)) for f in written["files"]]

    for run in runs:
        counts = ", ".join(f"{name} {len(rows)}" for name, rows in run.by_source.items())
        print(f"{run.source}: {describe(run)}: logged updates per source: {counts}")
    print()
    print(format_table(written["table"]))
    if len(written["table"]) - 1 > 40:
        print(f"(40 of {len(written['table']) - 1} rows shown; every row is in the files)")
    if written["note"]:
        print(f"\n{written['note']}")
    print("\nwritten: " + ", ".join(files))
    return 0
