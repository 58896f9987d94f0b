"""Whether a fine-tuned ``sentence_prediction`` checkpoint may predict on a data directory.

The classification head's output ``i`` is named by entry ``i`` (after the special symbols) of
the label dictionary the task reads from ``DATA/label/dict.txt``, so the checkpoint of one task
on another task's data (SST-2's ``0``/``1`` on RTE), or on a ``label/dict.txt`` in another order,
would write wrong labels without an error. Every fine-tuning checkpoint records its labels in
order, its regression flag and the GLUE task of its data (``compat/resume.py``,
``extra_state["truneg_records"]["sentence_prediction"]``); :func:`check_labels` compares them with
the data given. A checkpoint saved before that record existed is checked for what can be seen
(the head's output count against the labels, regression or not), with a warning that the labels
themselves cannot be checked.
"""

import json
import logging
import os
from typing import List, Optional

logger = logging.getLogger(__name__)

NSPECIAL = 4  # fairseq's Dictionary: <s> <pad> </s> <unk> come first
PADDING = "madeupword"  # fairseq-preprocess pads a dictionary with these (--padding-factor)


def data_labels(data: str) -> Optional[List[str]]:
    """The labels of ``data``/label/dict.txt in id order (padding entries left out), or None
    when the directory has no label dictionary (a regression task)."""
    path = os.path.join(data, "label", "dict.txt")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        symbols = [line.split(" ", 1)[0].rstrip("\r\n") for line in f if line.strip()]
    return [s for s in symbols if not s.startswith(PADDING)]


def data_task(data: str) -> Optional[str]:
    """The GLUE task ``data`` was prepared for (its ``meta.json``), or None."""
    try:
        with open(os.path.join(data, "meta.json"), encoding="utf-8") as f:
            task = json.load(f).get("task")
        return str(task) if task else None
    except (OSError, ValueError, AttributeError):
        return None


def _head_outputs(state: dict, head: str) -> Optional[int]:
    for key, value in state.get("model", {}).items():
        if key.endswith(f"classification_heads.{head}.out_proj.weight"):
            return int(value.shape[0])
    return None


def _labels_said(labels: Optional[List[str]]) -> str:
    return "a regression score" if labels is None else "labels " + ", ".join(labels)


def check_labels(checkpoint: str, state: dict, data: str, head: str) -> None:
    """Raise :class:`~truneg_fairseq.checkpoints.CheckpointError` when ``checkpoint`` (its saved
    ``state``) was fine-tuned on another task or another label dictionary than ``data`` holds;
    see the module docstring."""
    from truneg_fairseq.checkpoints import CheckpointError

    cfg = state["cfg"]["task"]
    regression = bool(cfg.get("regression_target", False))
    here_labels, here_task = data_labels(data), data_task(data)
    record = ((state.get("extra_state") or {}).get("truneg_records") or {}).get(
        "sentence_prediction"
    )
    where = f"{checkpoint} on --data {data}"
    if isinstance(record, dict):
        was_task, was_labels = record.get("data_task"), record.get("labels")
        if was_task and here_task and was_task != here_task:
            raise CheckpointError(
                f"{where}: the checkpoint was fine-tuned on {was_task} ({_labels_said(was_labels)}), "
                f"the data directory holds {here_task} ({_labels_said(here_labels)}). Give the "
                f"prepared folder of {was_task}, or the checkpoint fine-tuned on {here_task}"
            )
        if was_labels != here_labels and (was_labels is None or here_labels is None):
            pass  # regression against classification: said below
        elif was_labels is not None and here_labels != was_labels:
            order = sorted(was_labels) == sorted(here_labels or [])
            raise CheckpointError(
                f"{where}: the checkpoint's outputs are the labels {', '.join(was_labels)} in this "
                f"order, {data}/label/dict.txt lists {', '.join(here_labels or [])}"
                + (
                    " (the same labels in another order: every prediction would be named wrong)"
                    if order
                    else ""
                )
                + ". Give the label/dict.txt it was fine-tuned with (prepare the task again from "
                "the same train file), or the data directory it was fine-tuned on"
            )
    else:
        logger.warning(
            f"{checkpoint} records no label dictionary (fine-tuned before checkpoints recorded "
            f"it): its labels cannot be checked against {data}/label/dict.txt, only their number"
        )
    if regression and here_labels is not None:
        raise CheckpointError(
            f"{where}: the checkpoint predicts a regression score, the data directory holds "
            f"{_labels_said(here_labels)} ({data}/label/dict.txt). Give a regression task's "
            "folder (STS-B), or a classifier checkpoint"
        )
    if not regression and here_labels is None:
        raise CheckpointError(
            f"{where}: the checkpoint is a classifier, the data directory has no "
            f"label/dict.txt (a regression task). Give the folder of the task it was fine-tuned on"
        )
    outputs = _head_outputs(state, head)
    if not regression and outputs is not None and outputs != len(here_labels):
        raise CheckpointError(
            f"{where}: the checkpoint's classification head has {outputs} outputs, "
            f"{data}/label/dict.txt has {len(here_labels)} labels ({', '.join(here_labels)}). "
            "Give the data directory of the task it was fine-tuned on"
        )
