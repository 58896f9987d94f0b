"""Curves over training updates, drawn one way wherever the package draws them
(``truneg-plot-run``, the study): a figure a researcher can put on a slide as it is.

* One colour per criterion, whatever the model family and whichever front end trained it
  (``mlm_hard_correction`` and truneg-hf-train's ``hard_correction`` are one criterion; the
  baselines ``masked_lm``, ``mlm_plain``, ``electra`` and ``mlm`` share black), from a palette that stays
  distinct for the common colour-vision deficiencies.
* Series that lie on one another stay visible: each has its own marker, the earlier drawn ones
  wider (lines and markers, hollow markers) under the later, narrower ones, and markers of dense
  series at staggered updates.
* A legend in every panel, a title naming the run(s) and criterion, axis labels with units.
* Nothing is drawn without data: an empty series or panel is left out, and a figure without
  any is not written. The PNG is written atomically.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

from truneg_fairseq.outputs import temp_beside

# the criterion's kind: the names fairseq registers and truneg-hf-train's objectives
_KINDS = {
    "masked_lm": "baseline",
    "mlm_plain": "baseline",
    "mlm": "baseline",
    "electra": "baseline",
    "mlm_hard_correction": "hard_correction",
    "hard_correction": "hard_correction",
    "mlm_soft_reg": "soft_reg",
    "soft_reg": "soft_reg",
    "mlm_sent_kl": "sent_kl",
    "sent_kl": "sent_kl",
    "cline": "cline",
    "sentence_prediction": "sentence_prediction",
    "squad": "squad",
}
# Okabe and Ito's palette (black first: the baseline every other criterion is compared with)
_COLOURS = {
    "baseline": "#000000",
    "hard_correction": "#D55E00",
    "soft_reg": "#0072B2",
    "sent_kl": "#009E73",
    "cline": "#CC79A7",
    "sentence_prediction": "#E69F00",
    "squad": "#56B4E9",
}
_OTHER_COLOURS = ["#882255", "#999933", "#44AA99", "#999999", "#332288", "#AA4499"]
_MARKERS = {
    "baseline": "o",
    "hard_correction": "s",
    "soft_reg": "^",
    "sent_kl": "D",
    "cline": "v",
    "sentence_prediction": "P",
    "squad": "X",
}
MARKER_CYCLE = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h"]
LINE_STYLES = ["-", "--", ":", "-."]
LEGEND_INSIDE = 3  # series a legend inside a panel may list
MARKERS_PER_SERIES = 12  # on a dense series: enough to tell it, few enough to see the curve


def criterion_kind(criterion: Optional[str]) -> Optional[str]:
    """The kind of ``criterion`` ("mlm_hard_correction", "hard_correction (ELECTRA)", ...):
    "hard_correction", "baseline", ...; the name itself for a criterion of another plugin;
    None when it is not known."""
    if not criterion:
        return None
    name = criterion.split(" ", 1)[0]
    return _KINDS.get(name, name)


def criterion_colour(criterion: Optional[str], others: List[str]) -> str:
    """The colour of ``criterion``; one the package does not know takes the next colour left
    in ``others`` (kinds seen so far in the figure, appended to)."""
    kind = criterion_kind(criterion) or "?"
    if kind in _COLOURS:
        return _COLOURS[kind]
    if kind not in others:
        others.append(kind)
    return _OTHER_COLOURS[others.index(kind) % len(_OTHER_COLOURS)]


def criterion_marker(criterion: Optional[str]) -> Optional[str]:
    return _MARKERS.get(criterion_kind(criterion) or "")


@dataclass
class Series:
    label: str
    x: Sequence[float]
    y: Sequence[Optional[float]]
    colour: str
    marker: str = "o"
    linestyle: str = "-"
    # 0 is drawn at the bottom, widest; default: the order of the panel's series
    layer: Optional[int] = None


@dataclass
class Panel:
    title: str
    ylabel: str  # with its unit
    series: List[Series]


def _finite(y) -> bool:
    return y is not None and isinstance(y, (int, float)) and math.isfinite(y)


def _kept(panels: Sequence[Panel]) -> List[Panel]:
    out = []
    for panel in panels:
        series = [s for s in panel.series if any(_finite(y) for y in s.y)]
        if series:
            out.append(Panel(panel.title, panel.ylabel, series))
    return out


def draw(path: str, title: str, panels: Sequence[Panel], xlabel: str = "updates"):
    """A PNG of ``panels`` side by side at ``path`` (atomically) under ``title``; None, and
    nothing written, when no panel has a value to show. Returns what the figure shows, read
    back from it (:func:`_shown`)."""
    panels = _kept(panels)
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        layers = [i if s.layer is None else s.layer for i, s in enumerate(panel.series)]
        top = max(layers)
        for i, (s, layer) in enumerate(zip(panel.series, layers)):
            ys = [y if _finite(y) else float("nan") for y in s.y]
            under = (top - layer) / top if top else 0.0  # 1 at the bottom, 0 on top
            points = sum(_finite(y) for y in ys)
            every = max(1, math.ceil(points / MARKERS_PER_SERIES))
            ax.plot(
                list(s.x),
                ys,
                label=s.label,
                color=s.colour,
                linestyle=s.linestyle,
                linewidth=1.3 + 3.2 * under,
                alpha=1.0 - 0.45 * under,
                marker=s.marker,
                markersize=4.5 + 4.5 * under,
                markerfacecolor="none" if under > 0 else s.colour,
                markeredgewidth=1.4,
                markevery=(i % every, every) if every > 1 else None,
                zorder=2 + layer,
            )
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # updates are whole numbers
        ax.set_ylabel(panel.ylabel)
        ax.grid(alpha=0.3)
        if len(panel.series) <= LEGEND_INSIDE:
            ax.legend(fontsize=7.5, framealpha=0.85, loc="best")
        else:  # below the panel: inside, a long legend hides the curves
            columns = 1 if len(panel.series) <= 4 else 2
            ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=columns)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    shown = _shown(fig, axes[0])
    tmp = str(temp_beside(path, ".png"))
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")  # legends below panels included
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return shown


def _shown(fig, axes) -> dict:
    """{"title", "panels": [{"title", "xlabel", "ylabel", "legend", "lines": [(label, colour,
    marker, line style, line width)]}]}: what a reader of the figure sees."""
    from matplotlib.colors import to_hex

    return {
        "title": fig._suptitle.get_text() if fig._suptitle else "",
        "panels": [
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "legend": [t.get_text() for t in ax.get_legend().get_texts()]
                if ax.get_legend()
                else [],
                "lines": [
                    (
                        line.get_label(),
                        to_hex(line.get_color()).upper(),
                        line.get_marker(),
                        line.get_linestyle(),
                        line.get_linewidth(),
                    )
                    for line in ax.get_lines()
                ],
            }
            for ax in axes
        ],
    }
