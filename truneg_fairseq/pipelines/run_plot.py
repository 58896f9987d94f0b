"""The false-negative statistics of one training run over its updates (``truneg-plot-run``):
the records of its log or tensorboard folder (:mod:`truneg_fairseq.data.train_logs`) as the
study's results, shown with the study's own table and plot code
(:mod:`truneg_fairseq.pipelines.study.report`): a table (text, Markdown, CSV) with a row per
logged update and source, and the study's two PNG plots (the ratios; the loss and the
synonym-aware accuracy) when matplotlib is installed."""

from __future__ import annotations

import csv
import io
import os
from types import SimpleNamespace
from typing import Dict, List, Optional

from truneg_fairseq.data.train_logs import LogRecord
from truneg_fairseq.outputs import atomic_open
from truneg_fairseq.pipelines.study.report import (
    COLUMNS,
    format_rows,
    markdown_rows,
    plot,
    progress_table,
)

# what each log tag is called in the table: the training lines of each --log-interval are
# "train"; the end-of-epoch lines only stand in where there are none
TRAIN_INNER, EPOCH = "train_inner", "train"


def _row(values: Dict[str, float]) -> SimpleNamespace:
    """A record's values under the study's report names: the loss is the MLM part where the
    criterion logs one (``mlm_loss``), the whole loss otherwise (``masked_lm``)."""
    row = {key: values.get(key) for key, _, _ in COLUMNS}
    if row["mlm_loss"] is None:
        row["mlm_loss"] = values.get("loss")
    return SimpleNamespace(**row)


def run_results(records: List[LogRecord]) -> Dict[str, Dict[int, SimpleNamespace]]:
    """{source: {update: values}} in the study's shape: ``train`` (the log-interval lines, or
    the epoch ends where there are none) first, then each validation subset; a later line of the
    same update (a resumed run logs it again) replaces the earlier one."""
    tags = {r.tag for r in records}
    train_tag = TRAIN_INNER if TRAIN_INNER in tags else EPOCH
    order = [train_tag] + sorted(t for t in tags if t not in (TRAIN_INNER, EPOCH))
    out: Dict[str, Dict[int, SimpleNamespace]] = {}
    for tag in order:
        by_update = {r.update: _row(r.values) for r in records if r.tag == tag}
        if by_update:
            name = "train" if tag == train_tag else tag
            out[name] = {u: by_update[u] for u in sorted(by_update)}
    return out


def _drop_empty_columns(rows: List[List[str]]) -> List[List[str]]:
    keep = [i for i in range(len(rows[0])) if any(r[i] != "-" for r in rows[1:])]
    return [[r[i] for i in keep] for r in rows]


def ratio_table(results) -> List[List[str]]:
    """The study's progress table of ``results`` without the columns the log has no value for
    (the 512-token iteration level is computed offline only)."""
    rows = progress_table(results)
    rows[0][0] = "source"
    rows[0][2] = "loss (bits)"  # the study's column is the valid split's; here every source's
    return _drop_empty_columns(rows)


def shown_rows(rows: List[List[str]], most: int = 40) -> List[List[str]]:
    """The header and at most ``most`` rows, evenly spaced, the last one included."""
    body = rows[1:]
    if len(body) <= most:
        return rows
    step = len(body) / most
    picked = sorted({int(i * step) for i in range(most)} | {len(body) - 1})
    return [rows[0]] + [body[i] for i in picked]


def write_run_plot(results, out_dir: str) -> dict:
    """ratios.md, ratios.csv and (with matplotlib) ratios.png and losses.png in ``out_dir``,
    atomically; returns {"table": rows, "files": [...], "note": why there is no plot or None}."""
    os.makedirs(out_dir, exist_ok=True)
    rows = ratio_table(results)
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
    note: Optional[str] = None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        note = (
            "no plot: matplotlib is not installed (pip install matplotlib, or the [study] "
            "extra); the table above has the same numbers"
        )
    else:
        files += plot(out_dir, results, xlabel="updates")
    return {"table": rows, "files": files, "note": note}


def format_table(rows: List[List[str]]) -> str:
    return format_rows(shown_rows(rows))
