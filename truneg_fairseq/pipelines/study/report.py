"""What the study shows of its scores: the progress table and the paper's Table 2 layout (text,
TSV, Markdown), results.json, the plots, the machine description and summary.md. Every file
is written atomically."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict
from typing import TYPE_CHECKING, Dict, List

from truneg_fairseq.evaluation.columns import SCORE_COLUMNS
from truneg_fairseq.outputs import atomic_open

if TYPE_CHECKING:
    from truneg_fairseq.evaluation.false_negatives import Report


def format_value(value, fmt: str) -> str:
    """``value`` in ``fmt``, or "-" where a report has no such value (shared by the tables and
    the scoring log, so both show a missing value alike)."""
    return "-" if value is None else fmt.format(value)


COLUMNS = [("mlm_loss", "valid loss (bits)", "{:.3f}")] + SCORE_COLUMNS


def progress_table(results: Dict[str, Dict[int, "Report"]]) -> List[List[str]]:
    """Rows (run, update, the :data:`COLUMNS`) for every scored checkpoint, header first."""
    rows = [["run", "update"] + [c[1] for c in COLUMNS]]
    for rid, by_upd in results.items():
        for upd, r in by_upd.items():
            rows.append(
                [rid, str(upd)] + [format_value(getattr(r, k), fmt) for k, _, fmt in COLUMNS]
            )
    return rows


def table2(
    results: Dict[str, Dict[int, "Report"]], key: str, corner: str = "run"
) -> List[List[str]]:
    """The paper's Table 2 layout: one row per run, one column per share of stage 2 done."""
    upds = sorted({u for r in results.values() for u in r if u > 0})
    total = max(upds) if upds else 1
    rows = [[corner] + [f"{round(100 * u / total)}%" for u in upds]]
    for rid, by_upd in results.items():
        rows.append(
            [rid]
            + [
                format_value(getattr(by_upd[u], key), "{:.3f}") if u in by_upd else "-"
                for u in upds
            ]
        )
    return rows


def format_rows(rows: List[List[str]]) -> str:
    """Aligned text with a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_rows(rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(out)


def write_results(out_dir: str, results, cases, meta: dict) -> None:
    """results.json, progress.tsv, table2_{pred,iter}_level.tsv, table2_iter_level_512.tsv and cases.txt in ``out_dir`` (atomically)."""
    os.makedirs(out_dir, exist_ok=True)
    with atomic_open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(
            {
                "meta": meta,
                "results": {
                    k: {str(u): v.as_dict() for u, v in r.items()} for k, r in results.items()
                },
                "cases": [asdict(c) for c in cases],
            },
            f,
            indent=1,
        )
    for name, rows in (
        ("progress.tsv", progress_table(results)),
        ("table2_pred_level.tsv", table2(results, "pred_corr_ratio")),
        ("table2_iter_level.tsv", table2(results, "iter_corr_ratio")),
        ("table2_iter_level_512.tsv", table2(results, "iter_corr_ratio_512")),
    ):
        with atomic_open(os.path.join(out_dir, name), "w") as f:
            f.write("\n".join("\t".join(r) for r in rows) + "\n")
    with atomic_open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(c.format(i + 1) for i, c in enumerate(cases)) + "\n")


def _family_and_criterion(run_id: str):
    """(family, criterion) of a study run id (``roberta_mlm_hard_correction``:
    :func:`~truneg_fairseq.pipelines.study.setting.run_id`)."""
    family, _, criterion = run_id.partition("_")
    return (family, criterion) if criterion else ("", run_id)


# the study's figures: (file, title, [(report key, panel title, axis label with unit)])
STUDY_FIGURES = (
    (
        "ratios.png",
        "False-negative correction ratios on the valid split",
        [
            ("pred_corr_ratio", "prediction level", "prediction-level ratio (%)"),
            ("iter_corr_ratio", "iteration level", "iteration-level ratio (%)"),
        ],
    ),
    (
        "losses.png",
        "Valid MLM loss and synonym-aware accuracy",
        [
            ("mlm_loss", "MLM loss", "valid MLM loss (bits)"),
            ("syn_acc", "synonym-aware accuracy", "valid synonym-aware accuracy (%)"),
        ],
    ),
)


def study_figures(results) -> List[tuple]:
    """(file, title, panels) of the study's figures: a series per run, a colour and marker per
    criterion, the same for every model family, a line style per family
    (:mod:`truneg_fairseq.pipelines.figures`)."""
    from truneg_fairseq.pipelines.figures import (
        LINE_STYLES,
        Panel,
        Series,
        criterion_colour,
        criterion_marker,
    )

    families: Dict[str, List[str]] = {}  # family: its criteria, in order
    others: List[str] = []
    styles = {}
    for rid in results:
        family, criterion = _family_and_criterion(rid)
        families.setdefault(family, []).append(criterion)
        styles[rid] = (
            criterion_colour(criterion, others),
            criterion_marker(criterion) or "o",
            LINE_STYLES[list(families).index(family) % len(LINE_STYLES)],
            # a family's baseline at the bottom, widest: a criterion on it leaves it visible
            len(families[family]) - 1,
        )
    figures = []
    for name, title, keys in STUDY_FIGURES:
        panels = []
        for key, panel_title, ylabel in keys:
            series = []
            for rid, by_upd in results.items():
                upd = sorted(by_upd)
                ys = [getattr(by_upd[u], key) for u in upd]
                series.append(Series(rid, upd, ys, *styles[rid]))
            panels.append(Panel(panel_title, ylabel, series))
        runs = f"{len(results)} run" + ("" if len(results) == 1 else "s")
        figures.append((name, f"{title} ({runs})", panels))
    return figures


def plot(out_dir: str, results, xlabel: str = "updates after the shared stage 1") -> List[str]:
    """PNG plots of the ratios, the valid loss and the synonym-aware accuracy over stage-2
    updates (``xlabel``), one line per run (a missing value is a gap; :func:`study_figures`);
    returns the paths."""
    from truneg_fairseq.pipelines.figures import draw

    paths = []
    for name, title, panels in study_figures(results):
        path = os.path.join(out_dir, name)
        if draw(path, title, panels, xlabel):
            paths.append(path)
    return paths


def machine_description(gpu: bool) -> str:
    """CPU model and core count, or the CUDA device's name."""
    import torch

    if gpu and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda}), torch {torch.__version__}"
    cpu = platform.processor() or "CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, no GPU used, torch {torch.__version__}"


def write_summary(path: str, results, cases, meta: dict, command: str) -> None:
    """The tables and cases in Markdown, with the machine and the command (atomically)."""
    s = meta.get("setting", {})
    lines = [
        "# Counter-false-negative study",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {meta.get('machine', '?')}; wall time {meta.get('wall_seconds', 0):.0f}s.",
        "",
        f"Stage 1: {s.get('stage1_updates')} updates; stage 2: {s.get('stage2_updates')} updates per criterion, "
        f"batch {s.get('batch_size')} x <= {s.get('tokens_per_sample')} tokens, peak lr {s.get('lr')}. Valid: "
        f"{meta.get('valid_masked')} masked words in {meta.get('valid_blocks')} blocks (same masks for every "
        f"checkpoint); <unk> rate {meta.get('unk_rate')}.",
        "",
        "## Prediction-level correction ratio (%), by share of stage 2 done",
        "",
        markdown_rows(table2(results, "pred_corr_ratio")),
        "",
        "## Iteration-level correction ratio (%), by share of stage 2 done",
        "",
        markdown_rows(table2(results, "iter_corr_ratio")),
        "",
        "## Iteration-level correction ratio (%) over 512-token units (the paper's sequence length)",
        "",
        markdown_rows(table2(results, "iter_corr_ratio_512")),
        "",
        "## Every scored checkpoint (update 0: the shared stage-1 checkpoint)",
        "",
        markdown_rows(progress_table(results)),
        "",
        "## Figure-3-style cases",
        "",
    ]
    lines += [
        f"{i + 1}. {c.sentence} -- gold **{c.gold}**, prediction **{c.prediction}**; WordNet synonyms of "
        f"'{c.gold}': {', '.join(c.synonyms)}"
        for i, c in enumerate(cases)
    ]
    with atomic_open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
