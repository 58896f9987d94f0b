"""Predictions of a fine-tuned ``sentence_prediction`` model, and contrast consistency.

Contrast sets (Gardner et al., 2020; evaluated by CLINE) pair each original example with small
edits that change (or keep) its label. Accuracy counts every row alone; *contrast consistency*
("Con") counts a group (an original and all of its contrast variants, sharing a pair id) only
when every row of it is predicted correctly.
"""

import csv
import logging
from collections import OrderedDict
from typing import Dict, List, Sequence

import torch

logger = logging.getLogger(__name__)


@torch.no_grad()
def predict_labels(
    checkpoint: str, data: str, split: str = "valid", batch_size: int = 32, device: str = "cpu"
) -> List[str]:
    """One predicted label per example of a binarized split, in file order: the label string
    from the task's label dictionary (classification) or the score (regression)."""
    from truneg_fairseq.checkpoints import load_for_inference
    from truneg_fairseq.evaluation.glue_labels import check_labels

    def check(state, data_dir):
        """Before the task reads label/: the task, labels and head of the checkpoint against
        the data (the head's name is the run's own)."""
        task_cfg = state["cfg"]["task"]
        if task_cfg.get("_name") != "sentence_prediction":
            raise ValueError(
                f"{checkpoint} was not fine-tuned with --task sentence_prediction "
                f"(task {task_cfg.get('_name')})"
            )
        check_labels(checkpoint, state, data_dir, _head_name(task_cfg))

    models, cfg, task = load_for_inference(checkpoint, data, needs="input0/dict.txt", check=check)
    model = models[0].to(device).eval()
    head = _head_name(cfg.task)
    task.load_dataset(split)
    ds = task.dataset(split)
    regression = bool(cfg.task.get("regression_target", False))
    labels = task.label_dictionary
    out: List[str] = []
    for start in range(0, len(ds), batch_size):
        # the dataset's own order (no sorting), so predictions line up with the input file
        sample = ds.collater([ds[i] for i in range(start, min(start + batch_size, len(ds)))])
        logits, _ = model(
            sample["net_input"]["src_tokens"].to(device),
            features_only=True,
            classification_head_name=head,
        )
        if regression:
            out.extend(f"{v:.4f}" for v in logits.squeeze(-1).float().tolist())
        else:  # class i is the label dictionary's entry i after its special symbols
            out.extend(labels[i + labels.nspecial] for i in logits.argmax(-1).tolist())
    return out


def _head_name(task_cfg) -> str:
    return task_cfg.get("classification_head_name", None) or "sentence_classification_head"


def read_contrast_tsv(path: str, pair_column: str, label_column: str) -> List[Dict[str, str]]:
    """Rows of a GLUE-format TSV with a header that names the pair id and the label columns."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path} is empty")
        bom = header[0].startswith("\ufeff")
        for col, flag in ((pair_column, "--pair-column"), (label_column, "--label-column")):
            if col not in header:
                names = [h.lstrip("\ufeff") for h in header]
                shown = ", ".join(n if n.isprintable() else ascii(n) for n in names)
                why = (
                    " (the file starts with a byte-order mark, BOM: save it as UTF-8 without one)"
                    if bom and col == names[0]
                    else ""
                )
                raise ValueError(
                    f"{path} has no column '{col}' ({flag}){why}; its header is: {shown}"
                )
        rows = []
        for n, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise ValueError(
                    f"{path} line {n}: {len(row)} columns, the header has {len(header)}"
                )
            rows.append(dict(zip(header, row)))
    return rows


def contrast_consistency(
    pair_ids: Sequence[str], gold: Sequence[str], pred: Sequence[str]
) -> Dict[str, float]:
    """{"accuracy": % rows right, "consistency": % pair groups with every row right, "groups",
    "rows"}. Labels compare as strings (after stripping)."""
    if not (len(pair_ids) == len(gold) == len(pred)):
        raise ValueError(
            f"{len(pair_ids)} rows, {len(gold)} labels and {len(pred)} predictions must be equal"
        )
    groups: "OrderedDict[str, bool]" = OrderedDict()
    right = 0
    for pid, g, p in zip(pair_ids, gold, pred):
        ok = g.strip() == p.strip()
        right += ok
        groups[pid] = groups.get(pid, True) and ok
    n = len(gold)
    return {
        "accuracy": 100.0 * right / max(n, 1),
        "consistency": 100.0 * sum(groups.values()) / max(len(groups), 1),
        "groups": len(groups),
        "rows": n,
    }
