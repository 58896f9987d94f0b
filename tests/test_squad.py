"""SQuAD v1.1: windows and offsets, span decoding, and fine-tuning with the real fairseq-train."""

import json
import re

import pytest
import torch
from command_runs import run_script
from fairseq.data import Dictionary
from fairseq_runs import TINY_ELECTRA, TINY_ELECTRA_MODEL, fairseq_train
from squad_fixtures import CONTEXTS, QA, squad_json, squad_span_text, write_squad_dir

from truneg_fairseq.data import squad_windows as squad


@pytest.fixture(scope="module")
def wt(corpus_dir, data_bin):
    d = Dictionary.load(str(data_bin / "dict.txt"))
    d.add_symbol("<mask>")
    return squad.WordTokenizer(d, "sentencepiece", spm_model=str(corpus_dir / "spm.model"))


def test_windows_keep_every_answer_span_equal_to_its_text(wt, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(squad_json(1, broken=True)))
    data = squad.build_features(
        squad.load_squad_json(path), wt, max_len=40, doc_stride=8, max_query=10, train=True
    )
    assert data.skipped["answer_mismatch"] == 1 and data.skipped["answer_repaired"] == 1
    assert len(data.examples) == len(QA) + 1  # the mismatched one is skipped and counted
    assert max(len(f.tokens) for f in data.features) <= 40
    assert len(data.features) > len(data.examples)  # long contexts are split into windows
    for f in data.features:
        ex = data.examples[f.example]
        if f.start:  # the window holds the answer: decoding the gold span gives the answer text
            assert squad_span_text(ex, data.words[f.example], f, f.start, f.end) == ex.answers[0]
    assert all(
        any(f.start for f in data.features if f.example == e) for e in range(len(data.examples))
    )


def test_best_span_respects_order_and_length():
    start = torch.tensor([0.0, 0, 5, 0, 0, 9, 0])
    end = torch.tensor([0.0, 0, 0, 6, 0, 0, 0])
    # position 5 is the best start but every end after it is weak; (2, 3) wins among valid spans
    score, a, b = squad.best_span(start, end, ctx_offset=1, n_ctx=6, n_best=6, max_answer_len=30)
    assert (a, b) == (5, 5) or (a, b) == (2, 3)
    assert score == pytest.approx(max(9.0 + 0.0, 5.0 + 6.0))
    _, a, b = squad.best_span(start, end, ctx_offset=1, n_ctx=6, n_best=6, max_answer_len=1)
    assert b - a < 1


@pytest.mark.slow
def test_finetune_squad_logs_em_f1_then_predict_and_eval(
    data_bin, corpus_dir, synonym_table, tmp_path
):
    fairseq_train(
        data_bin,
        tmp_path / "pre",
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "2"],
    )
    sq = write_squad_dir(tmp_path / "squad", data_bin / "dict.txt")
    args = [
        *TINY_ELECTRA_MODEL,
        "--task",
        "squad",
        "--criterion",
        "squad",
        "--squad-spm-model",
        str(corpus_dir / "spm.model"),
        "--squad-max-len",
        "64",
        "--squad-doc-stride",
        "16",
        "--squad-max-query",
        "16",
        "--restore-file",
        str(tmp_path / "pre" / "checkpoint_last.pt"),
        "--reset-optimizer",
        "--reset-dataloader",
        "--reset-meters",
        "--reset-lr-scheduler",
        "--max-update",
        "6",
        "--best-checkpoint-metric",
        "f1",
        "--maximize-best-checkpoint-metric",
        "--required-batch-size-multiple",
        "1",
    ]
    out = fairseq_train(sq, tmp_path / "ft", args)
    log = out.stdout + out.stderr
    assert re.search(r"valid on 'valid' subset .*\| em [\d.]+ \| f1 [\d.]+", log), log[-2000:]
    assert "skipped {'answer_mismatch': 1, 'answer_repaired': 1" in log

    pred = tmp_path / "predictions.json"
    proc = run_script(
        "squad_predict.py",
        [
            "--data",
            str(sq),
            "--checkpoint",
            str(tmp_path / "ft" / "checkpoint_best.pt"),
            "--output",
            str(pred),
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    preds = json.loads(pred.read_text())
    assert set(preds) == {f"c0q{i}" for i in range(len(QA))}
    assert all(p in CONTEXTS[0] + CONTEXTS[1] for p in preds.values())  # spans of the context
    ev = run_script("squad_eval.py", [str(sq / "valid.json"), str(pred)])
    assert ev.returncode == 0 and 0 <= json.loads(ev.stdout)["f1"] <= 100


@pytest.mark.slow
def test_finetune_squad_on_roberta(data_bin, corpus_dir, tmp_path):
    from fairseq_runs import TINY_ROBERTA

    fairseq_train(
        data_bin, tmp_path / "pre", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2"]
    )
    sq = write_squad_dir(tmp_path / "squad", data_bin / "dict.txt", n_copies=1)
    arch = TINY_ROBERTA[:-2]  # without --tokens-per-sample (a masked_lm flag)
    out = fairseq_train(
        sq,
        tmp_path / "ft",
        [
            *arch,
            "--task",
            "squad",
            "--criterion",
            "squad",
            "--squad-spm-model",
            str(corpus_dir / "spm.model"),
            "--squad-max-len",
            "64",
            "--squad-doc-stride",
            "16",
            "--squad-max-query",
            "16",
            "--restore-file",
            str(tmp_path / "pre" / "checkpoint_last.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
            "--max-update",
            "3",
            "--required-batch-size-multiple",
            "1",
        ],
    )
    assert re.search(
        r"valid on 'valid' subset .*\| em [\d.]+ \| f1 [\d.]+", out.stdout + out.stderr
    )


@pytest.mark.slow
def test_squad_shell_recipe(data_bin, corpus_dir, tmp_path):
    from command_runs import run_recipe

    fairseq_train(
        data_bin,
        tmp_path / "pre",
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "2"],
    )
    sq = write_squad_dir(tmp_path / "squad", data_bin / "dict.txt", n_copies=1)
    proc = run_recipe(
        "squad/finetune.sh",
        [
            "small",
            str(sq),
            str(corpus_dir / "spm.model"),
            str(tmp_path / "pre" / "checkpoint_last.pt"),
            "--cpu",
            *TINY_ELECTRA_MODEL,
            "--squad-max-len",
            "64",
            "--squad-doc-stride",
            "16",
            "--squad-max-query",
            "16",
            "--batch-size",
            "4",
        ],
        tmp_path,
        SAVE_DIR=str(tmp_path / "ft"),
        UPDATES="3",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "ft" / "predictions.json").is_file()
    assert '"exact_match"' in proc.stdout and '"f1"' in proc.stdout


def test_gpt2_bpe_offsets(tmp_path, wn):
    from corpus_fixtures import write_toy_gpt2_bpe

    bpe = write_toy_gpt2_bpe(tmp_path / "bpe")
    d = Dictionary.load(str(bpe / "dict.txt"))
    wt = squad.WordTokenizer(
        d,
        "gpt2",
        gpt2_encoder_json=str(bpe / "encoder.json"),
        gpt2_vocab_bpe=str(bpe / "vocab.bpe"),
    )
    enc = json.loads((bpe / "encoder.json").read_text())
    assert wt("the") == [d.index(str(enc["\u0120the"]))]  # ' the' is one merged token 'Ġthe'
    path = tmp_path / "t.json"
    path.write_text(json.dumps(squad_json(1)))
    data = squad.build_features(
        squad.load_squad_json(path), wt, max_len=120, doc_stride=32, max_query=20, train=True
    )
    for f in data.features:
        if f.start:
            ex = data.examples[f.example]
            assert squad_span_text(ex, data.words[f.example], f, f.start, f.end) == ex.answers[0]
    assert sum(1 for f in data.features if f.start) >= len(QA)
