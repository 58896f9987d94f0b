"""Contrast consistency ("Con"): the metric on hand-made groups, the report CLI, and predictions
from a real fine-tuned sentence_prediction checkpoint."""

import pytest
from command_runs import run_script
from corpus_fixtures import make_classification_data
from fairseq_runs import TINY_ROBERTA, fairseq_train
from finetune_flags import sentence_prediction_args

from truneg_fairseq.evaluation.contrast import contrast_consistency


def test_consistency_counts_a_group_only_when_every_row_is_right():
    pair = ["a", "a", "a", "b", "b", "c"]
    gold = ["1", "0", "1", "0", "0", "1"]
    pred = ["1", "0", "0", "0", "0", "1"]  # group a has one wrong variant
    r = contrast_consistency(pair, gold, pred)
    assert r["groups"] == 3 and r["rows"] == 6
    assert r["accuracy"] == pytest.approx(100 * 5 / 6)
    assert r["consistency"] == pytest.approx(100 * 2 / 3)
    with pytest.raises(ValueError, match="must be equal"):
        contrast_consistency(pair, gold, pred[:-1])


def write_tsv(path, rows):
    path.write_text(
        "sentence\tlabel\tpair_id\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8"
    )


def test_report_cli(tmp_path):
    tsv = tmp_path / "contrast.tsv"
    write_tsv(
        tsv,
        [
            ("the farmer will stay .", "1", "p1"),
            ("the farmer will leave .", "0", "p1"),
            ("a big house .", "1", "p2"),
            ("a small house .", "0", "p2"),
        ],
    )
    pred = tmp_path / "pred.txt"
    pred.write_text("1\n0\n1\n1\n")
    out = run_script(
        "robustness_report.py", ["contrast", "--tsv", str(tsv), "--pred", str(pred), "--name", "m"]
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[1].split() == ["m", "4", "2", "75.0", "50.0"]
    pred.write_text("1\n0\n")
    bad = run_script("robustness_report.py", ["contrast", "--tsv", str(tsv), "--pred", str(pred)])
    assert bad.returncode != 0 and "has 4 rows but" in bad.stderr
    bad = run_script(
        "robustness_report.py",
        ["contrast", "--tsv", str(tsv), "--pred", str(pred), "--pair-column", "group"],
    )
    assert bad.returncode != 0 and "no column 'group' (--pair-column)" in bad.stderr


@pytest.mark.slow
def test_predictions_from_a_finetuned_checkpoint(corpus_dir, tmp_path):
    data = make_classification_data(corpus_dir, tmp_path / "cls")
    # without --tokens-per-sample (a masked_lm flag)
    fairseq_train(data, tmp_path / "ft", sentence_prediction_args(TINY_ROBERTA[:-2], max_update=2))
    out = run_script(
        "glue_predict.py",
        [
            str(tmp_path / "ft" / "checkpoint_last.pt"),
            "--data",
            str(data),
            "--output",
            str(tmp_path / "pred.txt"),
            "--device",
            "cpu",
        ],
    )
    assert out.returncode == 0, out.stderr[-3000:]
    preds = (tmp_path / "pred.txt").read_text().split("\n")[:-1]
    gold = (data / "raw" / "valid.label").read_text().split("\n")[:-1]
    assert len(preds) == len(gold) == 40 and set(preds) <= {"0", "1"}
