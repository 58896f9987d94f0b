"""What the study shows of its scores: the progress table and the paper's Table 2 layout (text,
TSV, Markdown), results.json, the plots, the machine description and summary.md. Every file
is written atomically."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import TYPE_CHECKING, Dict, List

from truneg_fairseq.evaluation.columns import SCORE_COLUMNS
from truneg_fairseq.outputs import atomic_open, temp_beside

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


def plot(out_dir: str, results, xlabel: str = "updates after the shared stage 1") -> List[str]:
    """PNG plots of the ratios, the valid loss and the synonym-aware accuracy over stage-2
    updates (``xlabel``), one line per run (a missing value is a gap); returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, keys in (
        ("ratios.png", ("pred_corr_ratio", "iter_corr_ratio")),
        ("losses.png", ("mlm_loss", "syn_acc")),
    ):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, key in zip(axes, keys):
            label = dict((k, name) for k, name, _ in COLUMNS)[key]
            for rid, by_upd in results.items():
                upd = sorted(by_upd)
                ys = [getattr(by_upd[u], key) for u in upd]
                ys = [float("nan") if y is None else y for y in ys]
                ax.plot(upd, ys, marker="o" if len(upd) <= 50 else None, label=rid)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        tmp = str(temp_beside(path, ".png"))
        try:
            fig.savefig(tmp, dpi=110)
            os.replace(tmp, path)
        finally:
            plt.close(fig)
            if os.path.exists(tmp):
                os.unlink(tmp)
        paths.append(path)
    return paths


def machine_description(gpu: bool) -> str:
    """CPU model and core count, or the CUDA device's name."""
    import platform

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
