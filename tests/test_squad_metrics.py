"""SQuAD v1.1 scoring: official normalisation on hand-checked cases, and the CLI."""

import json

import pytest
from command_runs import run_script

from truneg_fairseq.evaluation.squad_metrics import evaluate, exact_match, f1, normalize_answer


def test_normalisation_articles_punctuation_case():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear; the plum.") == "apple pear plum"
    assert normalize_answer("Theatre") == "theatre"  # 'the' only as a whole word
    assert exact_match("the Eiffel tower.", "Eiffel Tower") == 1.0


def test_f1_hand_computed():
    # pred tokens: [paris, france]; gold: [paris] -> P=1/2, R=1, F1=2/3
    assert f1("Paris, France", "Paris") == pytest.approx(2 / 3)
    assert f1("in the year 1889", "1889") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert f1("London", "Paris") == 0.0


def test_evaluate_takes_best_gold_and_counts_missing(tmp_path):
    data = [
        {
            "title": "t",
            "paragraphs": [
                {
                    "context": "c",
                    "qas": [
                        {
                            "id": "q1",
                            "question": "?",
                            "answers": [
                                {"text": "the Eiffel Tower", "answer_start": 0},
                                {"text": "tower", "answer_start": 0},
                            ],
                        },
                        {
                            "id": "q2",
                            "question": "?",
                            "answers": [{"text": "1889", "answer_start": 0}],
                        },
                        {
                            "id": "q3",
                            "question": "?",
                            "answers": [{"text": "Paris", "answer_start": 0}],
                        },
                    ],
                }
            ],
        }
    ]
    preds = {"q1": "Tower", "q2": "in 1889"}
    res = evaluate(data, preds)
    assert res["exact_match"] == pytest.approx(100 / 3)  # q1 exact against 'tower'
    assert res["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
    assert res["missing_predictions"] == 1 and res["questions"] == 3

    (tmp_path / "dev.json").write_text(json.dumps({"version": "1.1", "data": data}))
    (tmp_path / "pred.json").write_text(json.dumps(preds))
    proc = run_script("squad_eval.py", [str(tmp_path / "dev.json"), str(tmp_path / "pred.json")])
    assert proc.returncode == 0, proc.stderr
    # stdout: the official evaluate-v1.1.py's JSON, its floats at full precision for programs
    # (100.0 * sum / total, as it computes them); stderr: the scores rounded for the reader
    scores = json.loads(proc.stdout)
    assert scores["exact_match"] == 100.0 * 1 / 3 and scores["f1"] == 100.0 * (1 + 2 / 3) / 3
    assert "exact_match 33.33 | f1 55.56 | 3 questions" in proc.stderr
    assert "1 of 3 questions have no prediction" in proc.stderr
    bad = run_script("squad_eval.py", [str(tmp_path / "dev.json"), str(tmp_path / "nope.json")])
    assert bad.returncode != 0 and "nope.json not found" in bad.stderr
