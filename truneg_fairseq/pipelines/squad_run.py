"""SQuAD v1.1 predictions of a fine-tuned checkpoint and their scores: what
``truneg-squad-predict`` and ``truneg-squad-eval`` run."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Dict

from truneg_fairseq.errors import CorpusError

logger = logging.getLogger(__name__)


@dataclass
class SquadPredictConfig:
    checkpoint: str  # fine-tuned with --task squad
    data: str  # the --task squad folder (dict.txt, SUBSET.json)
    subset: str = "valid"
    batch_size: int = 16  # questions per batch


def predict_squad(cfg: SquadPredictConfig) -> Dict[str, str]:
    """Question id -> answer text for every question of ``cfg.subset``; the windowing and
    tokenizer settings come from the checkpoint. Raises
    :class:`~truneg_fairseq.checkpoints.CheckpointError` for a checkpoint that cannot be used."""
    import torch

    import truneg_fairseq
    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
    from truneg_fairseq.data import squad_windows as squad

    truneg_fairseq.register()
    models, ck_cfg, task = load_for_inference(cfg.checkpoint, cfg.data)
    if ck_cfg.task._name != "squad":
        raise CheckpointError(
            f"{cfg.checkpoint} was not fine-tuned with --task squad (task {ck_cfg.task._name})"
        )
    model = models[0].eval()
    task.load_dataset(cfg.subset)
    ds = task.dataset(cfg.subset)
    preds: Dict[str, str] = {}
    with torch.no_grad():
        for start in range(0, len(ds), cfg.batch_size):
            sample = ds.collater(
                [ds[i] for i in range(start, min(start + cfg.batch_size, len(ds)))]
            )
            s, e = squad.span_logits(
                model, sample["net_input"]["src_tokens"], task.dictionary.pad()
            )
            preds.update(
                squad.decode(
                    sample["squad"], s, e, task.cfg.squad_n_best, task.cfg.squad_max_answer_len
                )
            )
    return preds


def read_predictions(path: str) -> Dict[str, str]:
    """A predictions JSON (question id -> answer text); :class:`CorpusError` naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            preds = json.load(f)
    except FileNotFoundError:
        raise CorpusError(f"predictions file {path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(
            f"predictions file {path} is not JSON ({e}); expected question id -> answer text"
        ) from None
    if not isinstance(preds, dict):
        raise CorpusError(f"{path}: expected an object mapping question id -> answer text")
    return preds


def score_predictions_file(dataset: str, predictions: str) -> dict:
    """EM/F1 (official normalisation) of a predictions file against a SQuAD v1.1 JSON; the
    answers are scored by text: their offsets are not checked here."""
    from truneg_fairseq.data.squad_windows import read_squad_file
    from truneg_fairseq.evaluation.squad_metrics import evaluate

    data = read_squad_file(dataset, check_answers=False)[0]["data"]
    return evaluate(data, read_predictions(predictions))
