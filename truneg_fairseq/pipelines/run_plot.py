"""The statistics of training runs over their updates (``truneg-plot-run``): the records of each
run's log or tensorboard folder (:mod:`truneg_fairseq.data.train_logs`) as a table (text,
Markdown, CSV) with a row per run, logged update and source (training, each validation
subset), and the figures of :mod:`truneg_fairseq.pipelines.figures`: the correction ratios, the
loss and accuracies, and a fine-tuning run's task scores, each only where the logs hold its
values. Several runs share every table and figure, for comparison."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence

from truneg_fairseq.data.train_logs import LogRecord, TrainingRun, loss_bits
from truneg_fairseq.evaluation.columns import SCORE_COLUMNS
from truneg_fairseq.outputs import atomic_open
from truneg_fairseq.pipelines.figures import (
    LINE_STYLES,
    MARKER_CYCLE,
    Panel,
    Series,
    criterion_colour,
    draw,
)
from truneg_fairseq.pipelines.study.report import format_rows, format_value, markdown_rows

# what each log tag is called in the table: the training lines of each --log-interval are
# "train"; the end-of-epoch lines only stand in where there are none
TRAIN_INNER, EPOCH = "train_inner", "train"

# the scores fine-tuning logs (fairseq's sentence_prediction on GLUE, the plugin's SQuAD), all
# on a 0-100 scale
TASK_COLUMNS = [
    ("accuracy", "accuracy %", "{:.1f}"),
    ("mcc", "MCC x100", "{:.1f}"),
    ("f1", "F1 %", "{:.2f}"),
    ("acc_and_f1", "acc and F1 %", "{:.2f}"),
    ("pearson_and_spearman", "Pearson/Spearman x100", "{:.2f}"),
    ("em", "EM %", "{:.2f}"),
]
# each task score's panel: (title, axis label with its unit)
TASK_PANELS = {
    "accuracy": ("accuracy", "accuracy (%)"),
    "mcc": ("Matthews correlation", "MCC (x100)"),
    "f1": ("F1", "F1 (%)"),
    "acc_and_f1": ("mean of accuracy and F1", "accuracy and F1 (%)"),
    "pearson_and_spearman": ("mean of Pearson and Spearman", "correlation (x100)"),
    "em": ("exact match", "exact match (%)"),
}
# the 512-token iteration level is computed offline only: never in a log
COLUMNS = (
    [("loss", "loss (bits)", "{:.3f}")]
    + [c for c in SCORE_COLUMNS if c[0] != "iter_corr_ratio_512"]
    + TASK_COLUMNS
)

FIGURES = ("ratios.png", "losses.png", "scores.png")
TABLES = ("ratios.md", "ratios.csv")
OUTPUTS = TABLES + FIGURES


@dataclass
class RunResults:
    """One run as the table and figures show it: its name, criterion, front end and
    {source: {update: values}} (``train`` first, then each validation subset)."""

    label: str
    criterion: Optional[str]
    origin: str
    by_source: Dict[str, Dict[int, SimpleNamespace]]
    source: str = ""


def _row(record: LogRecord) -> SimpleNamespace:
    """A record's values under the table's names, the loss in bits (:func:`loss_bits`)."""
    row = {key: record.values.get(key) for key, _, _ in COLUMNS}
    row["loss"] = loss_bits(record.values, record.origin)
    return SimpleNamespace(**row)


def run_results(records: List[LogRecord]) -> Dict[str, Dict[int, SimpleNamespace]]:
    """{source: {update: values}}: ``train`` (the log-interval lines, or the epoch ends where
    there are none) first, then each validation subset; a later line of the same update (a
    resumed run logs it again) replaces the earlier one."""
    tags = {r.tag for r in records}
    train_tag = TRAIN_INNER if TRAIN_INNER in tags else EPOCH
    order = [train_tag] + sorted(t for t in tags if t not in (TRAIN_INNER, EPOCH))
    out: Dict[str, Dict[int, SimpleNamespace]] = {}
    for tag in order:
        by_update = {r.update: _row(r) for r in records if r.tag == tag}
        if by_update:
            name = "train" if tag == train_tag else tag
            out[name] = {u: by_update[u] for u in sorted(by_update)}
    return out


def has_values(by_source) -> bool:
    return any(
        getattr(row, key) is not None
        for rows in by_source.values()
        for row in rows.values()
        for key, _, _ in COLUMNS
    )


def results_of(run: TrainingRun, label: str) -> RunResults:
    return RunResults(label, run.criterion, run.origin, run_results(run.records), run.source)


def _drop_empty_columns(rows: List[List[str]], first: int) -> List[List[str]]:
    keep = [i for i in range(len(rows[0])) if i < first or any(r[i] != "-" for r in rows[1:])]
    return [[r[i] for i in keep] for r in rows]


def ratio_table(runs: Sequence[RunResults]) -> List[List[str]]:
    """Header, then a row per run, source and update (a ``run`` column where there are several
    runs), without the columns no run has a value for."""
    several = len(runs) > 1
    head = (["run"] if several else []) + ["source", "update"] + [c[1] for c in COLUMNS]
    rows = [head]
    for run in runs:
        for source, by_update in run.by_source.items():
            for update, r in by_update.items():
                values = [format_value(getattr(r, k), fmt) for k, _, fmt in COLUMNS]
                rows.append(([run.label] if several else []) + [source, str(update)] + values)
    return _drop_empty_columns(rows, 3 if several else 2)


def shown_rows(rows: List[List[str]], most: int = 40) -> List[List[str]]:
    """The header and at most ``most`` rows, evenly spaced, the last one included."""
    body = rows[1:]
    if len(body) <= most:
        return rows
    step = len(body) / most
    picked = sorted({int(i * step) for i in range(most)} | {len(body) - 1})
    return [rows[0]] + [body[i] for i in picked]


def describe(run: RunResults) -> str:
    criterion = f"criterion {run.criterion}" if run.criterion else "criterion not in the log"
    return f"{run.label} ({criterion}, {run.origin})"


def _who(runs: Sequence[RunResults]) -> str:
    if len(runs) == 1:
        return describe(runs[0])
    if len(runs) <= 3:
        return " vs ".join(r.label for r in runs)
    return f"{len(runs)} runs"


def _series(runs: Sequence[RunResults], key: str) -> List[Series]:
    """A series per run and source: the run's criterion colour, a marker per run, a line style
    per source (training solid, validation dashed)."""
    out, others = [], []
    for i, run in enumerate(runs):
        colour = criterion_colour(run.criterion or f"run {run.label}", others)
        for j, (source, by_update) in enumerate(run.by_source.items()):
            label = source
            if len(runs) > 1:
                label = (
                    f"{run.label} ({run.criterion}) {source}"
                    if run.criterion
                    else (f"{run.label} {source}")
                )
            updates = list(by_update)
            out.append(
                Series(
                    label,
                    updates,
                    [getattr(by_update[u], key) for u in updates],
                    colour,
                    MARKER_CYCLE[i % len(MARKER_CYCLE)],
                    LINE_STYLES[j % len(LINE_STYLES)],
                )
            )
    return out


def figure_panels(runs: Sequence[RunResults]) -> Dict[str, tuple]:
    """{file: (title, panels)} of every figure (a figure whose panels have no value is not
    drawn)."""
    who = _who(runs)

    def panel(key, title, ylabel):
        return Panel(title, ylabel, _series(runs, key))

    return {
        "ratios.png": (
            f"False-negative correction ratios: {who}",
            [
                panel("pred_corr_ratio", "prediction level", "prediction-level ratio (%)"),
                panel("iter_corr_ratio", "iteration level", "iteration-level ratio (%)"),
            ],
        ),
        "losses.png": (
            f"Loss and accuracy: {who}",
            [
                panel("loss", "loss", "loss (bits)"),
                panel("mlm_acc", "MLM accuracy", "MLM accuracy (%)"),
                panel("syn_acc", "synonym-aware accuracy", "synonym-aware accuracy (%)"),
            ],
        ),
        "scores.png": (
            f"Task scores: {who}",
            [panel(key, *TASK_PANELS[key]) for key, _, _ in TASK_COLUMNS],
        ),
    }


def write_run_plot(runs, out_dir: str) -> dict:
    """ratios.md, ratios.csv and (with matplotlib) the figures that have values, in
    ``out_dir`` (atomically) of ``runs`` (:class:`RunResults`). Returns {"table": rows,
    "files": [...], "note": what was not drawn and why, or None, "figures": {file: what it
    shows (:func:`~truneg_fairseq.pipelines.figures.draw`), None where not drawn}}."""
    os.makedirs(out_dir, exist_ok=True)
    rows = ratio_table(runs)
    files = []
    md = os.path.join(out_dir, "ratios.md")
    with atomic_open(md, "w") as f:
        f.write(markdown_rows(rows) + "\n")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path = os.path.join(out_dir, "ratios.csv")
    with atomic_open(path, "w") as f:
        f.write(buf.getvalue())
    files += [md, path]
    notes, shown = [], {}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        notes.append(
            "no plot: matplotlib is not installed (pip install matplotlib, or the [study] "
            "extra); the table above has the same numbers"
        )
    else:
        for name, (title, panels) in figure_panels(runs).items():
            shown[name] = draw(os.path.join(out_dir, name), title, panels)
            if shown[name]:
                files.append(os.path.join(out_dir, name))
            elif name == "ratios.png":
                notes.append(
                    "no ratios.png: the log holds no correction ratio (a criterion with a "
                    "synonym table logs them: docs/criterions.md)"
                )
    return {"table": rows, "files": files, "note": "\n".join(notes) or None, "figures": shown}


def format_table(rows: List[List[str]]) -> str:
    return format_rows(shown_rows(rows))
