"""End to end from imported HuggingFace checkpoints: real fairseq-train continues an imported BERT
(mlm_hard_correction) and an imported ELECTRA pair (mlm_soft_reg), saves and resumes;
sentence_prediction fine-tunes an imported ELECTRA discriminator; evaluate_mlm.py --text runs on
an imported model and prints Table 2's ratios and Figure 3's cases."""

import re
from pathlib import Path

import pytest
import torch
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines
from fairseq_runs import TINY_ELECTRA_MODEL, fairseq_train, updates
from finetune_flags import RESET, sentence_prediction_args
from hf_fixtures import save_bert, save_electra_pair, wordpiece_vocab

from truneg_fairseq.convert import hf as hf_convert

TINY_BERT = ["--arch", "bert_hf_tiny", "--tokens-per-sample", "64"]


def wordpiece_tokenize(vocab_txt: Path, lines, out: Path) -> Path:
    from tokenizers import BertWordPieceTokenizer

    tok = BertWordPieceTokenizer(str(vocab_txt), lowercase=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "".join(
            " ".join(tok.encode(line, add_special_tokens=False).tokens) + "\n" for line in lines
        )
    )
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory, wn):
    """A tiny BERT whose MLM head favours "main", an ELECTRA pair, both imported; the tiny corpus
    tokenized with their WordPiece vocabulary and binarized with the imported dict.txt; a WordNet
    synonym table for that dictionary."""
    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.lexicon import build_table, vocab_view

    root = tmp_path_factory.mktemp("hf_train")
    vocab = wordpiece_vocab()
    hf = save_bert(root / "bert_hf", vocab=vocab)
    with torch.no_grad():  # predictions become "main": a synonym of primary/chief/principal
        hf.cls.predictions.bias[vocab.index("main")] = 50.0
    hf.save_pretrained(str(root / "bert_hf"))
    bert = hf_convert.import_hf(root / "bert_hf", root / "bert")
    save_electra_pair(root / "disc_hf", root / "gen_hf", vocab=vocab)
    electra = hf_convert.import_hf(
        root / "disc_hf", root / "electra", generator_dir=root / "gen_hf"
    )
    lines = tiny_corpus_lines(600, seed=3)
    train = wordpiece_tokenize(bert / "vocab.txt", lines[:540], root / "tok" / "train.txt")
    valid = wordpiece_tokenize(bert / "vocab.txt", lines[540:], root / "tok" / "valid.txt")
    data_bin = corpus_steps.binarize(train, valid, root / "data-bin", srcdict=bert / "dict.txt")
    table, _ = build_table(vocab_view(data_bin / "dict.txt", "whitespace"), source="wordnet", wn=wn)
    table.save(data_bin / "synonyms.npz")
    (root / "valid.raw").write_text("\n".join(lines[540:]) + "\n")
    return {"root": root, "bert": bert, "electra": electra, "data_bin": data_bin, "lines": lines}


@pytest.mark.slow
def test_continue_imported_bert_with_hard_correction_and_resume(imported, tmp_path):
    save = tmp_path / "ckpt"
    args = [*TINY_BERT, "--criterion", "mlm_hard_correction", "--synonym-table", "synonyms.npz"]
    first = fairseq_train(
        imported["data_bin"],
        save,
        [*args, "--restore-file", str(imported["bert"] / "model.pt"), *RESET, "--max-update", "3"],
    )
    log = first.stdout + first.stderr
    assert re.search(r"Loaded checkpoint .*bert/model\.pt \(epoch 1 @ 0 updates\)", log)
    assert "pred_corr_ratio=" in log and updates(log) == 3
    # the head's preference for "main" survived the import: many corrections from the first step
    ratios = [float(x) for x in re.findall(r"pred_corr_ratio=([\d.]+)", log)]
    assert max(ratios) > 0
    again = fairseq_train(imported["data_bin"], save, [*args, "--max-update", "5"])
    log2 = again.stdout + again.stderr
    assert "Loaded checkpoint" in log2 and "@ 3 updates" in log2 and updates(log2) == 5


@pytest.mark.slow
def test_continue_imported_electra_pair_with_soft_reg_and_resume(imported, tmp_path):
    save = tmp_path / "ckpt"
    args = [
        *TINY_ELECTRA_MODEL,
        "--electra-layernorm-eps",
        "1e-12",
        "--tokens-per-sample",
        "64",
        "--task",
        "electra",
        "--criterion",
        "mlm_soft_reg",
        "--synonym-table",
        "synonyms.npz",
    ]
    first = fairseq_train(
        imported["data_bin"],
        save,
        [
            *args,
            "--restore-file",
            str(imported["electra"] / "model.pt"),
            *RESET,
            "--max-update",
            "3",
        ],
    )
    log = first.stdout + first.stderr
    assert re.search(r"Loaded checkpoint .*electra/model\.pt \(epoch 1 @ 0 updates\)", log)
    assert "disc_loss=" in log and updates(log) == 3
    again = fairseq_train(imported["data_bin"], save, [*args, "--max-update", "5"])
    log2 = again.stdout + again.stderr
    assert "@ 3 updates" in log2 and updates(log2) == 5
    # and the continued pair goes back out to transformers
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    hf_convert.export_hf(
        save / "checkpoint_last.pt", tmp_path / "hf", vocab_file=imported["electra"] / "vocab.txt"
    )
    ElectraForPreTraining.from_pretrained(str(tmp_path / "hf"))
    ElectraForMaskedLM.from_pretrained(str(tmp_path / "hf" / "generator"))


@pytest.mark.slow
def test_finetune_imported_electra_discriminator_with_sentence_prediction(imported, tmp_path):
    from truneg_fairseq.data import corpus_steps

    lines = tiny_corpus_lines(240, seed=7)
    labels = ["1" if (" stay " in line or " remain " in line) else "0" for line in lines]
    raw = tmp_path / "raw"
    vocab_txt = imported["electra"] / "vocab.txt"
    for split, sl in (("train", slice(0, 200)), ("valid", slice(200, 240))):
        wordpiece_tokenize(vocab_txt, lines[sl], raw / f"{split}.tok")
        corpus_steps.atomic_write_lines(raw / f"{split}.label", labels[sl])
    data = tmp_path / "cls"
    corpus_steps.binarize(
        raw / "train.tok",
        raw / "valid.tok",
        data / "input0",
        srcdict=imported["electra"] / "dict.txt",
    )
    corpus_steps.binarize(raw / "train.label", raw / "valid.label", data / "label")
    out = fairseq_train(
        data,
        tmp_path / "ft",
        sentence_prediction_args(
            [*TINY_ELECTRA_MODEL, "--electra-layernorm-eps", "1e-12"],
            max_update=4,
            restore=imported["electra"] / "model.pt",
            best_accuracy=True,
        ),
    )
    log = out.stdout + out.stderr
    assert "loading the discriminator only: dropped" in log and "Loaded checkpoint" in log
    assert re.search(r"valid on 'valid' subset .*accuracy [\d.]+", log) and updates(log) == 4


@pytest.mark.slow
def test_evaluate_mlm_on_text_prints_ratios_and_cases(imported):
    out = run_script(
        "evaluate_mlm.py",
        [
            "--text",
            str(imported["root"] / "valid.raw"),
            "--synonym-table",
            str(imported["data_bin"] / "synonyms.npz"),
            "--show",
            "2",
            "--device",
            "cpu",
            "--mask-prob",
            "0.3",
            str(imported["bert"]),
        ],
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("case ") == 2
    assert "prediction: main" in out.stdout and re.search(
        r"synonyms of '\w+' in the vocabulary: .*\bmain\b", out.stdout
    )
    m = re.search(r"pred_corr_ratio ([\d.]+) \| iter_corr_ratio ([\d.]+)", out.stdout)
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0
    bad = run_script(
        "evaluate_mlm.py",
        ["--text", str(imported["root"] / "valid.raw"), "--show", "2", str(imported["bert"])],
    )
    assert bad.returncode == 2 and "--show needs --synonym-table" in bad.stderr


@pytest.mark.slow
def test_bert_recipe_script_continues_an_import(imported, tmp_path):
    from command_runs import run_recipe

    # no size flags: the 2 x 32 model's sizes come from the import's import.json; its published
    # MLM head needs no warm-up
    tiny = [
        "--max-update",
        "2",
        "--batch-size",
        "4",
        "--update-freq",
        "1",
        "--warmup-updates",
        "1",
        "--cpu",
    ]
    out = run_recipe(
        "bert/pretrain.sh",
        [str(imported["bert"]), str(imported["data_bin"]), "mlm_hard_correction", *tiny],
        tmp_path,
        SAVE_DIR=str(tmp_path / "ckpt"),
        SYNONYM_TABLE=str(imported["data_bin"] / "synonyms.npz"),
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert re.search(r"Loaded checkpoint .*bert/model\.pt", log) and updates(log) == 2
    assert "warming it up" not in log and (tmp_path / "ckpt" / "checkpoint_last.pt").is_file()
    missing = run_recipe(
        "bert/pretrain.sh",
        [str(tmp_path / "nowhere"), str(imported["data_bin"]), "masked_lm"],
        tmp_path,
    )
    assert missing.returncode == 2 and "convert_hf.py import" in missing.stderr
