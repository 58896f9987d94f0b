"""Original -> transformed scores (the paper's Table 5) and contrast consistency: what
``truneg-robustness-report`` computes. Unreadable inputs raise
:class:`~truneg_fairseq.errors.CorpusError` naming the file."""

from __future__ import annotations

import json
import os
from typing import Dict, List

from truneg_fairseq.errors import CorpusError


def squad_scores(dev: str, pred: str) -> Dict[str, float]:
    """EM/F1 of a predictions file against its own dev file (official normalisation)."""
    from truneg_fairseq.evaluation.squad_metrics import evaluate

    try:
        with open(dev, encoding="utf-8") as f:
            data = json.load(f)["data"]
        with open(pred, encoding="utf-8") as f:
            preds = json.load(f)
    except (OSError, json.JSONDecodeError, KeyError) as e:
        raise CorpusError(f"cannot read {dev} / {pred} ({e})") from None
    r = evaluate(data, preds)
    return {"EM": r["exact_match"], "F1": r["f1"]}


def glue_scores(log: str) -> Dict[str, float]:
    """The best validation accuracy in a fairseq log."""
    from truneg_fairseq.data.glue_tasks import parse_validation_log

    if not os.path.isfile(log):
        raise CorpusError(f"{log} not found")
    acc = [v["accuracy"] for s, v in parse_validation_log(log) if s == "valid" and "accuracy" in v]
    if not acc:
        raise CorpusError(f"{log} has no validation accuracy")
    return {"Acc": max(acc)}


def drop_row(name: str, ori: Dict[str, float], trans: Dict[str, float]) -> List[str]:
    """The header line and the row: original -> transformed and the drop."""
    keys = list(ori)
    head = f"{'model':<30} {'Ori ' + '/'.join(keys):>14} -> {'Trans ' + '/'.join(keys):>16}  drop"
    o = "/".join(f"{ori[k]:.1f}" for k in keys)
    t = "/".join(f"{trans[k]:.1f}" for k in keys)
    d = "/".join(f"{ori[k] - trans[k]:.1f}" for k in keys)
    return [head, f"{name:<30} {o:>14} -> {t:>16}  {d}"]


def contrast_scores(tsv: str, pred: str, pair_column: str, label_column: str) -> dict:
    """Accuracy and contrast consistency of one predicted label per row of a GLUE-format TSV
    whose rows carry a pair id (an original and its contrast variants share one)."""
    from truneg_fairseq.evaluation.contrast import contrast_consistency, read_contrast_tsv

    try:
        rows = read_contrast_tsv(tsv, pair_column, label_column)
    except (OSError, ValueError) as e:
        raise CorpusError(str(e)) from None
    try:
        with open(pred, encoding="utf-8") as f:
            preds = [line.rstrip("\n") for line in f]
    except OSError as e:
        raise CorpusError(f"cannot read --pred {pred} ({e})") from None
    if len(preds) != len(rows):
        raise CorpusError(
            f"{tsv} has {len(rows)} rows but {pred} has {len(preds)} predictions: predict the "
            "split prepared from this file (truneg-prepare-glue skips malformed rows: see its "
            "meta.json)"
        )
    return contrast_consistency(
        [row[pair_column] for row in rows], [row[label_column] for row in rows], preds
    )
