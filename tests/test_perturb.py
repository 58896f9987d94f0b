"""Robustness perturbations on real WordNet: spans stay aligned, formats are kept, seeded."""

import json
import random

from command_runs import run_script
from glue_fixtures import write_glue
from squad_fixtures import squad_json

from truneg_fairseq.data import perturbations
from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted


def test_swap_syn_wordnet_keeps_punctuation_case_and_protected_spans(wn):
    text = "The primary reason, surely, is to stay at home."
    new, edits = perturbations.swap_syn_wordnet(
        text, wn, random.Random(0), prob=1.0, max_swaps=10, protected=[(40, 47)]
    )
    assert new != text and new.endswith("home.")  # 'home' is protected
    assert new.startswith("The ") and "," in new
    assert len(edits) <= 10
    # at most max_swaps
    new1, edits1 = perturbations.swap_syn_wordnet(text, wn, random.Random(0), prob=1.0, max_swaps=1)
    assert len(edits1) == 1
    # seeded
    assert (
        perturbations.swap_syn_wordnet(text, wn, random.Random(3), prob=0.5)[0]
        == perturbations.swap_syn_wordnet(text, wn, random.Random(3), prob=0.5)[0]
    )


def test_squad_perturbations_keep_every_answer_span(wn):
    data = squad_json(3)
    for method in ("swap_syn_wordnet", "add_sentence_diverse"):
        out, counts = perturbations.perturb_squad(data, method, wn, seed=2, prob=0.5)
        assert counts["changed"] > 0
        for art_o, art in zip(data["data"], out["data"]):
            for po, p in zip(art_o["paragraphs"], art["paragraphs"]):
                for qo, q in zip(po["qas"], p["qas"]):
                    assert q["question"] == qo["question"]
                    for ao, a in zip(qo["answers"], q["answers"]):
                        assert a["text"] == ao["text"]  # answers untouched
                        assert (
                            p["context"][a["answer_start"] : a["answer_start"] + len(a["text"])]
                            == a["text"]
                        )
                if method == "add_sentence_diverse":
                    assert len(p["context"]) > len(po["context"])


def test_cli_squad_and_glue_and_report(tmp_path, wn):
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps(squad_json(2)))
    out = tmp_path / "dev.swap.json"
    proc = run_script(
        "perturb.py", ["squad", "--method", "swap_syn_wordnet", "--prob", "0.5", str(dev), str(out)]
    )
    assert proc.returncode == 0, proc.stderr
    assert "contexts changed" in proc.stdout and json.loads(out.read_text())["version"] == "1.1"

    glue = write_glue(tmp_path / "glue")
    proc = run_script(
        "perturb.py",
        [
            "glue",
            "--task",
            "MNLI",
            "--prob",
            "0.5",
            str(glue / "MNLI"),
            str(tmp_path / "swap" / "MNLI"),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    exs, skipped = read_split_counted(TASKS["MNLI"], tmp_path / "swap" / "MNLI" / "dev_matched.tsv")
    orig, _ = read_split_counted(TASKS["MNLI"], glue / "MNLI" / "dev_matched.tsv")
    assert not skipped and [e.label for e in exs] == [e.label for e in orig]
    assert any(e.text1 != o.text1 for e, o in zip(exs, orig))
    assert (tmp_path / "swap" / "MNLI" / "train.tsv").read_text() == (
        glue / "MNLI" / "train.tsv"
    ).read_text()

    # report: identical predictions on both -> no drop; a wrong answer -> a drop
    data = json.loads(dev.read_text())
    gold = {
        qa["id"]: qa["answers"][0]["text"]
        for a in data["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
    }
    (tmp_path / "p1.json").write_text(json.dumps(gold))
    worse = dict(gold, **{next(iter(gold)): "nothing"})
    (tmp_path / "p2.json").write_text(json.dumps(worse))
    rep = run_script(
        "robustness_report.py",
        [
            "squad",
            "--ori",
            str(dev),
            str(tmp_path / "p1.json"),
            "--trans",
            str(out),
            str(tmp_path / "p2.json"),
            "--name",
            "m",
        ],
    )
    assert rep.returncode == 0, rep.stderr
    row = rep.stdout.strip().splitlines()[-1]
    assert "100.0/100.0" in row and row.split()[-1] != "0.0/0.0"


def test_report_glue_accuracy_from_fairseq_logs(tmp_path):
    line = "2026-01-01 00:00:00 | INFO | valid | epoch 00{e} | valid on 'valid' subset | loss 0.7 | accuracy {a} | wps 1 | num_updates 3\n"
    (tmp_path / "ori.log").write_text(line.format(e=1, a=71.5) + line.format(e=2, a=80.0))
    (tmp_path / "trans.log").write_text(line.format(e=1, a=60.0) + line.format(e=2, a=74.5))
    rep = run_script(
        "robustness_report.py",
        [
            "glue",
            "--ori",
            str(tmp_path / "ori.log"),
            "--trans",
            str(tmp_path / "trans.log"),
            "--name",
            "m",
        ],
    )
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.strip().splitlines()[-1].split()[1:] == ["80.0", "->", "74.5", "5.5"]
    bad = run_script(
        "robustness_report.py",
        ["glue", "--ori", str(tmp_path / "nope.log"), "--trans", str(tmp_path / "trans.log")],
    )
    assert bad.returncode != 0 and "nope.log not found" in bad.stderr
