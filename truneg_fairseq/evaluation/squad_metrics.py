"""SQuAD v1.1 scoring with the official answer normalisation (lower-case, ASCII punctuation and
the articles a/an/the removed, whitespace collapsed); EM and token F1 take the best over the
gold answers of each question, a question without a prediction scores 0 and counts in the
total: the definitions of the official v1.1 evaluation script, pinned on known cases by
tests/test_evaluate_metrics.py (its quirks included: an answer that normalises to nothing
matches exactly another such answer but has F1 0).

Why this module rather than a library: HuggingFace ``evaluate``'s "squad" metric is a script
that ``evaluate.load`` fetches from the Hub at run time (no network here, and none promised on a
training machine); ``torchmetrics`` (``SQuAD``) computes it offline but would add itself and
``lightning-utilities`` to the install for these few lines. The official definitions are short
and fixed, so they are kept here.
"""

import collections
import re
import string
from typing import Dict, List

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def evaluate(dataset: List[dict], predictions: Dict[str, str]) -> Dict[str, float]:
    """``dataset``: the ``data`` list of a SQuAD v1.1 JSON file; ``predictions``: question id ->
    answer text. Returns exact_match and f1 in %, plus the number of questions and of
    questions without a prediction (scored 0)."""
    em = f = 0.0
    total = missing = 0
    for article in dataset:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    missing += 1
                    continue
                golds = [a["text"] for a in qa["answers"]]
                pred = predictions[qa["id"]]
                em += max(exact_match(pred, g) for g in golds)
                f += max(f1(pred, g) for g in golds)
    return {
        "exact_match": 100.0 * em / max(total, 1),
        "f1": 100.0 * f / max(total, 1),
        "questions": total,
        "missing_predictions": missing,
    }
