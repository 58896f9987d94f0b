"""examples/glue/finetune.sh on checkpoints of every kind and size, through its real command line
(fp32, CPU): the model read from the checkpoint (a CLINE checkpoint fine-tunes as its
backbone, an imported BERT with 40 positions keeps them), a directory name with spaces, commas,
quotes and non-ASCII characters, and the logged validation accuracy equal to
scripts/glue_predict.py's on the same checkpoint and split."""

import re
import shutil

import pytest
import torch
from command_runs import run_recipe, run_script
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, fairseq_train
from glue_fixtures import write_glue

RUN = ["common.cpu=true", "dataset.num_workers=0", "common.log_interval=1"]
ODD_NAME = "my runs, 'v1' \"quoted\" über"


def prepare(glue_dir, out, dict_txt, *tokenizer):
    proc = run_script(
        "prepare_glue.py",
        [
            "--glue-dir",
            str(glue_dir),
            "--output-dir",
            str(out),
            "--tasks",
            "RTE",
            "--dict",
            str(dict_txt),
            "--tokenizer",
            *tokenizer,
        ],
    )
    assert proc.returncode == 0, proc.stderr
    return out


def finetune(glue_bin, checkpoint, save_dir, *overrides, **env):
    r = run_recipe(
        "glue/finetune.sh",
        ["RTE", env.pop("SIZE", "small"), str(glue_bin), str(checkpoint), *RUN, *overrides],
        save_dir.parent,
        SAVE_DIR=str(save_dir),
        BSZ="8",
        **env,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return (save_dir / "train.log").read_text(), r.stderr


def best_accuracy(log):
    return max(
        float(a) for a in re.findall(r"valid on 'valid' subset .*?\| accuracy ([\d.]+)", log)
    )


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    return write_glue(tmp_path_factory.mktemp("glue"), n_train=16, n_dev=13)


@pytest.fixture(scope="module")
def spm_rte(glue_dir, corpus_dir, data_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("glue_spm") / "glue-bin"
    spm = ["sentencepiece", "--spm-model", str(corpus_dir / "spm.model")]
    return prepare(glue_dir, out, data_bin / "dict.txt", *spm)


@pytest.mark.slow
def test_log_and_glue_predict_agree_in_an_odd_directory(data_bin, spm_rte, tmp_path):
    """A tiny ELECTRA fine-tuned in a directory named with spaces, a comma, quotes and 'ü', the
    examples truncated to 12 tokens (task.max_positions=12, a field the config declares): the
    best logged accuracy is scripts/glue_predict.py's on checkpoint_best.pt, over all 13 dev
    examples (13 is no multiple of the batch of 8: no example is dropped)."""
    work = tmp_path / ODD_NAME
    # fairseq-preprocess takes comma-separated prefixes: the data is prepared elsewhere
    spm_rte = shutil.copytree(spm_rte, work / "glue-bin")
    fairseq_train(data_bin, work / "pre", [*TINY_ELECTRA, "--task", "electra", "--max-update", "2"])
    log, err = finetune(
        spm_rte,
        work / "pre" / "checkpoint_last.pt",
        work / "run",
        "task.max_positions=12",
        "optimization.max_epoch=2",
        WARMUP="1",
    )
    # the schedule is the run's: 2 epochs of 16 examples in batches of 8, the rate at its peak
    # after the warm-up's one update and 0 at the last
    assert "electra_small from the checkpoint, 64 positions, 4 updates (1 of warm-up)" in err
    rates = re.findall(r"epoch \d+: .*num_updates=(\d+), lr=([\d.e-]+)", log)
    assert [(int(n), float(lr)) for n, lr in rates] == [(1, 3e-4), (2, 2e-4), (3, 1e-4), (4, 0)]
    assert log.count("valid on 'valid' subset") == 2  # each epoch's validation once
    assert (work / "run" / "config" / "rte.yaml").is_file()
    # hydra's notices and DEBUG lines are not the user's; its files stay under the run
    assert not re.search(
        r"DEBUG:hydra|version_base|[Hh]ydra 1\.|hydra\.cc|working directory", err
    ), err
    assert (work / "run" / "hydra" / ".hydra" / "config.yaml").is_file()
    assert sorted(p.name for p in work.iterdir()) == ["glue-bin", "pre", "run"]
    accuracy = best_accuracy(log)
    preds = work / "preds.txt"
    p = run_script(
        "glue_predict.py",
        [
            str(work / "run" / "checkpoint_best.pt"),
            "--data",
            str(spm_rte / "RTE"),
            "--output",
            str(preds),
        ],
    )
    assert p.returncode == 0, p.stderr
    predicted = preds.read_text().split()
    from truneg_fairseq.checkpoints import load_for_inference

    _, cfg, task = load_for_inference(
        str(work / "run" / "checkpoint_best.pt"), str(spm_rte / "RTE"), needs="input0/dict.txt"
    )
    assert cfg.task.max_positions == 12 and cfg.task.shorten_method == "truncate"
    task.load_dataset("valid")
    ds, labels = task.dataset("valid"), task.label_dictionary
    assert max(ds[i]["net_input.src_tokens"].numel() for i in range(len(ds))) == 12  # truncated
    gold = [labels[int(ds[i]["target"]) + labels.nspecial] for i in range(len(ds))]
    assert len(predicted) == len(gold) == 13
    right = sum(p == g for p, g in zip(predicted, gold))
    assert round(100 * right / 13, 1) == pytest.approx(accuracy, abs=0.051), (predicted, gold, log)


@pytest.mark.slow
def test_cline_checkpoint_fine_tunes_as_its_backbone(corpus_dir, data_bin, spm_rte, wn, tmp_path):
    """The documented hand-off: a CLINE checkpoint (cline_roberta_tiny with its RTD head and
    task weights, two updates) fine-tuned by examples/glue/finetune.sh: the arch is read from
    the checkpoint, the CLINE-only tensors are dropped, the RoBERTa encoder continues."""
    from truneg_fairseq.data import cline_data as cline
    from truneg_fairseq.text import TokenizerSpec

    raw = tmp_path / "lines.txt"
    raw.write_text("".join((corpus_dir / "raw" / "valid.txt").read_text().splitlines(True)[:40]))
    settings = cline.Settings(
        seed=1, tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    cline.make_cline_data(
        {"train": raw, "valid": raw},
        tmp_path / "cline",
        settings,
        srcdict=data_bin / "dict.txt",
        wn=wn,
    )
    sizes = TINY_ROBERTA[2:-2]  # the encoder sizes, without --arch and --tokens-per-sample
    fairseq_train(
        tmp_path / "cline" / "data-bin",
        tmp_path / "cline_run",
        [
            "--task",
            "cline",
            "--criterion",
            "cline",
            "--arch",
            "cline_roberta_tiny",
            *sizes,
            "--tokens-per-sample",
            "64",
            "--cline-learned-weights",
            "--max-update",
            "2",
        ],
    )
    ckpt = tmp_path / "cline_run" / "checkpoint_last.pt"
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)["model"]
    assert "cline_log_vars" in saved and any(k.startswith("rtd_head.") for k in saved)
    log, err = finetune(
        spm_rte, ckpt, tmp_path / "ft", "optimization.max_epoch=1", SIZE="roberta_base"
    )
    assert "cline_roberta_tiny from the checkpoint, 64 positions" in err
    assert re.search(r"valid on 'valid' subset .*\| accuracy [\d.]+", log), log[-2000:]
    tuned = torch.load(
        tmp_path / "ft" / "checkpoint_best.pt", map_location="cpu", weights_only=False
    )
    assert "cline_log_vars" not in tuned["model"]
    assert not any(k.startswith("rtd_head.") for k in tuned["model"])
    assert any(
        k.startswith("classification_heads.sentence_classification_head") for k in tuned["model"]
    )


@pytest.mark.slow
def test_imported_bert_with_40_positions_fine_tunes(glue_dir, tmp_path):
    """A published BERT with 40 positions imported with convert_hf.py, GLUE prepared with its
    WordPiece vocabulary: the recipe builds a 40-position model (not the config's 512)."""
    from hf_fixtures import bert_config, wordpiece_vocab, write_vocab

    from truneg_fairseq.convert import hf as hf_convert

    vocab = wordpiece_vocab()
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    BertForMaskedLM(bert_config(len(vocab), max_position_embeddings=40)).save_pretrained(
        str(tmp_path / "hf")
    )
    write_vocab(tmp_path / "hf", vocab)
    imported = hf_convert.import_hf(tmp_path / "hf", tmp_path / "imported")
    glue_bin = prepare(
        glue_dir,
        tmp_path / "glue-bin",
        imported / "dict.txt",
        "wordpiece",
        "--vocab",
        str(imported / "vocab.txt"),
    )
    log, err = finetune(
        glue_bin,
        imported / "model.pt",
        tmp_path / "ft",
        "optimization.max_epoch=1",
        SIZE="roberta_base",
    )
    assert re.search(r"bert\w* from the checkpoint, 40 positions", err), err[-2000:]
    assert re.search(r"valid on 'valid' subset .*\| accuracy [\d.]+", log), log[-2000:]
    tuned = torch.load(
        tmp_path / "ft" / "checkpoint_best.pt", map_location="cpu", weights_only=False
    )
    positions = tuned["model"]["encoder.sentence_encoder.embed_positions.weight"]
    assert positions.shape[0] == 40 + 2  # fairseq's learned positions start after padding_idx


def test_bad_checkpoint_is_one_clear_error(spm_rte, tmp_path):
    bad = tmp_path / "not_a_checkpoint.pt"
    torch.save({"model": {}}, bad)
    r = run_recipe(
        "glue/finetune.sh",
        ["RTE", "small", str(spm_rte), str(bad)],
        tmp_path,
        SAVE_DIR=str(tmp_path / "x"),
    )
    assert r.returncode != 0
    assert "is not a fairseq checkpoint" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0  # one line
    shutil.rmtree(tmp_path / "x", ignore_errors=True)
