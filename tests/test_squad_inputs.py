"""SQuAD files: one validation path for every reader (task, perturbations, prediction, scoring),
nearest-occurrence answer repair, counted skips, errors naming the file; and one span-logit
function whose batches carry everything decoding needs."""

import json

import pytest
import torch
from command_runs import run_script
from fairseq_runs import TINY_ROBERTA, build_components
from squad_fixtures import CONTEXTS, squad_json, write_squad_dir

from truneg_fairseq.data import squad_windows as squad
from truneg_fairseq.data.corpus_steps import CorpusError
from truneg_fairseq.evaluation import squad_metrics


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


def test_empty_data_and_non_json_name_the_file(tmp_path):
    empty = _write(tmp_path / "empty.json", {"version": "1.1", "data": []})
    with pytest.raises(CorpusError, match=f'{empty}: "data" is empty'):
        squad.load_squad_json(empty)
    junk = tmp_path / "junk.json"
    junk.write_text("not json {")
    preds = _write(tmp_path / "preds.json", {"x": "y"})
    proc = run_script("squad_eval.py", [str(junk), str(preds)])
    assert (
        proc.returncode == 2
        and f"{junk} is not JSON" in proc.stderr
        and str(preds) not in proc.stderr
    )
    good = _write(tmp_path / "dev.json", squad_json(1))
    proc = run_script("squad_eval.py", [str(good), str(junk)])
    assert proc.returncode == 2 and f"predictions file {junk} is not JSON" in proc.stderr
    proc = run_script("squad_eval.py", [str(empty), str(preds)])
    assert proc.returncode == 2 and f'{empty}: "data" is empty' in proc.stderr


def test_question_without_text_is_skipped_and_counted_missing_id_is_an_error(tmp_path, caplog):
    obj = squad_json(1)
    del obj["data"][0]["paragraphs"][0]["qas"][1]["question"]
    path = _write(tmp_path / "t.json", obj)
    with caplog.at_level("WARNING"):
        exs = squad.load_squad_json(path)
    assert exs.skipped["no_question"] == 1 and len(exs) == 5 and "c0q1" not in {e.qid for e in exs}
    assert 'skipped 1 questions without a "question" text (ids c0q1)' in caplog.text
    del obj["data"][0]["paragraphs"][1]["qas"][0]["id"]
    with pytest.raises(
        CorpusError, match=f'{_write(path, obj)}: article 0, paragraph 1: a question has no "id"'
    ):
        squad.load_squad_json(path)
    obj = squad_json(1)
    obj["data"][0]["paragraphs"][0]["qas"][2]["answers"] = [{"text": "x"}]
    with pytest.raises(CorpusError, match='question c0q2: "answers" must be a list'):
        squad.load_squad_json(_write(path, obj))


def test_answer_one_char_off_goes_to_the_nearest_occurrence(tmp_path):
    ctx = CONTEXTS[1]
    first, last = ctx.find("the big house"), ctx.rfind("the big house")
    assert first < last - 50
    obj = {
        "version": "1.1",
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": ctx,
                        "qas": [
                            {
                                "id": "late",
                                "question": "where ?",
                                "answers": [{"text": "the big house", "answer_start": last + 1}],
                            },
                            {
                                "id": "early",
                                "question": "what ?",
                                "answers": [{"text": "the big house", "answer_start": first - 1}],
                            },
                            {
                                "id": "gone",
                                "question": "who ?",
                                "answers": [{"text": "a zebra", "answer_start": 3}],
                            },
                        ],
                    }
                ],
            }
        ],
    }
    exs = squad.load_squad_json(_write(tmp_path / "t.json", obj))
    assert {e.qid: e.answer_start for e in exs} == {"late": last, "early": first}
    assert exs.skipped == {"answer_mismatch": 1, "answer_repaired": 2, "no_question": 0}
    assert (
        squad.nearest_occurrence("ab ab ab", "ab", 4) == 3
        and squad.nearest_occurrence("ab", "zz", 0) == -1
    )


def test_perturb_squad_reads_a_file_the_task_repairs(tmp_path):
    obj = squad_json(2, broken=True)  # an answer not in its context, one at a wrong offset
    del obj["data"][1]["paragraphs"][0]["qas"][0]["question"]
    src = _write(tmp_path / "dev.json", obj)
    out = tmp_path / "dev.swap.json"
    proc = run_script(
        "perturb.py", ["squad", "--method", "swap_syn_wordnet", "--prob", "0.5", str(src), str(out)]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "'answer_mismatch': 1, 'answer_repaired': 1, 'no_question': 1" in proc.stdout
    for article in json.loads(out.read_text())["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                for a in qa["answers"]:
                    assert (
                        para["context"][a["answer_start"] : a["answer_start"] + len(a["text"])]
                        == a["text"]
                    )
    empty = _write(tmp_path / "empty.json", {"data": []})
    proc = run_script(
        "perturb.py",
        ["squad", "--method", "swap_syn_wordnet", str(empty), str(tmp_path / "o.json")],
    )
    assert proc.returncode == 2 and f'{empty}: "data" is empty' in proc.stderr


def test_criterion_decodes_from_the_batch_alone(data_bin, corpus_dir, tmp_path):
    sq = write_squad_dir(tmp_path / "squad", data_bin / "dict.txt", n_copies=1)
    task, model, criterion = build_components(
        sq,
        [
            "--criterion",
            "squad",
            "--squad-spm-model",
            str(corpus_dir / "spm.model"),
            "--squad-max-len",
            "48",
            "--squad-doc-stride",
            "16",
            "--squad-max-query",
            "16",
        ],
        arch_args=TINY_ROBERTA[:-2],
        task="squad",
    )
    task.load_dataset("valid")
    ds = task.dataset("valid")
    batch = ds.collater([ds[i] for i in range(len(ds))])
    data = ds.data
    task.datasets.clear()  # the criterion must not need the task's datasets
    model.eval()
    with torch.no_grad():
        loss, n, log = criterion(model, batch)
        start, end = squad.span_logits(
            model, batch["net_input"]["src_tokens"], task.dictionary.pad()
        )
    assert n == batch["net_input"]["src_tokens"].size(0) and log["n_questions"] == len(
        data.examples
    )
    preds = squad.decode(batch["squad"], start, end, 20, 30)
    golds = dict(zip(batch["squad"]["qids"], batch["squad"]["answers"]))
    assert log["em_sum"] == sum(
        max(squad_metrics.exact_match(p, g) for g in golds[q]) for q, p in preds.items()
    )
    # logits that point at the gold windows' spans decode to exactly the gold answers
    gold_s = torch.full_like(start, -10.0)
    gold_e = torch.full_like(end, -10.0)
    rows = torch.arange(len(batch["start"]))
    gold_s[rows, batch["start"]] = torch.where(batch["start"] > 0, 10.0, -10.0)
    gold_e[rows, batch["end"]] = torch.where(batch["end"] > 0, 10.0, -10.0)
    assert squad.decode(batch["squad"], gold_s, gold_e) == {q: a[0] for q, a in golds.items()}
