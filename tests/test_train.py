"""Tier 4: the real fairseq-train entry point with --user-dir, for each criterion."""

import re

import pytest
from command_runs import run_script
from fairseq_runs import TINY_ROBERTA, TINY_TN_ROBERTA, arch_for, fairseq_train, updates
from objective_cases import roberta_criteria

from truneg_fairseq.core import objectives

CRITERIA = roberta_criteria()


@pytest.mark.slow
@pytest.mark.parametrize("criterion", CRITERIA)
def test_train_save_resume_restore(data_bin, synonym_table, tmp_path, criterion):
    save = tmp_path / "ckpt"
    args = [
        *arch_for(criterion),
        "--criterion",
        criterion,
        "--synonym-table",
        "synonyms.npz",
        "--tensorboard-logdir",
        str(tmp_path / "tb"),
    ]
    first = fairseq_train(data_bin, save, [*args, "--max-update", "6"])
    out = first.stdout + first.stderr
    assert (save / "checkpoint_last.pt").is_file()
    assert "synonym table" in out and "pairs" in out  # the relative path was found in the data dir
    assert re.search(r"train_inner .*mlm_loss=.*pred_corr_ratio=.*iter_corr_ratio=", out)
    assert re.search(r"valid on 'valid' subset \| loss [\d.]+ \| mlm_loss [\d.]+", out)
    for term in objectives.by_criterion(criterion).logged_terms:  # each term the objective adds
        assert f"{term}=" in out, term
    assert updates(out) == 6
    assert list((tmp_path / "tb").rglob("events.out.tfevents.*"))

    # resume from checkpoint_last.pt (weights-only torch.load would refuse it without the plugin)
    second = fairseq_train(data_bin, save, [*args, "--max-update", "9"])
    out2 = second.stdout + second.stderr
    assert "Loaded checkpoint" in out2 and "@ 6 updates" in out2
    assert updates(out2) == 9

    # --restore-file into a fresh directory, optimizer and counters reset
    third = fairseq_train(
        data_bin,
        tmp_path / "ft",
        [
            *args,
            "--max-update",
            "2",
            "--restore-file",
            str(save / "checkpoint_last.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
        ],
    )
    out3 = third.stdout + third.stderr
    assert "Loaded checkpoint" in out3
    assert updates(out3) == 2


@pytest.mark.slow
def test_one_sentence_per_sample_trains_under_numpy_2(data_bin, synonym_table, tmp_path):
    """--sample-break-mode eos: fairseq's eos-mode block index used numpy.compat (gone in NumPy 2)."""
    proc = fairseq_train(
        data_bin,
        tmp_path / "eos",
        [
            *TINY_TN_ROBERTA,
            "--criterion",
            "mlm_hard_correction",
            "--synonym-table",
            str(synonym_table),
            "--sample-break-mode",
            "eos",
            "--max-update",
            "2",
        ],
        cli=True,
    )
    assert updates(proc.stdout + proc.stderr) == 2
    assert (tmp_path / "eos" / "checkpoint_last.pt").is_file()


def test_hc_without_table_fails_clearly(data_bin, tmp_path):
    proc = fairseq_train(
        data_bin,
        tmp_path / "c",
        [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--max-update", "1"],
        check=False,
    )
    assert proc.returncode != 0
    assert "needs --synonym-table FILE" in proc.stderr


@pytest.mark.slow
def test_table_for_other_dictionary_fails_clearly(data_bin, tmp_path):
    from truneg_fairseq.lexicon import SynonymTable

    other = tmp_path / "other.npz"
    SynonymTable.empty(["<s>", "<pad>", "</s>", "<unk>", "x"]).save(other)
    proc = fairseq_train(
        data_bin,
        tmp_path / "c",
        [
            *TINY_TN_ROBERTA,
            "--criterion",
            "mlm_soft_reg",
            "--synonym-table",
            str(other),
            "--max-update",
            "1",
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert "was built for another dictionary" in proc.stderr and "Rebuild the table" in proc.stderr


def test_prepare_corpus_rejects_empty_input(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    proc = run_script(
        "prepare_corpus.py", ["--input", str(empty), "--output-dir", str(tmp_path / "out")]
    )
    assert proc.returncode != 0
    assert f"--input {empty}: no text" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_prepare_corpus_wordnet_entries(tmp_path):
    """--wordnet-headwords: each definition line starts with its synset's words, as in a dictionary."""
    out = tmp_path / "out"
    proc = run_script(
        "prepare_corpus.py",
        [
            "--wordnet-glosses",
            "--wordnet-headwords",
            "--max-lines",
            "3000",
            "--tokenizer",
            "whitespace",
            "--vocab-size",
            "2000",
            "--output-dir",
            str(out),
            "--keep-intermediates",
        ],
    )
    assert proc.returncode == 0, proc.stderr
    assert "WordNet glosses with their headwords" in proc.stdout
    lines = (out / "raw" / "train.txt").read_text().splitlines() + (
        out / "raw" / "valid.txt"
    ).read_text().splitlines()
    # WordNet's noun file starts with "entity: that which is perceived ..."
    assert any(line.startswith("entity: that which is perceived") for line in lines)
    assert sum(bool(re.match(r"^[\w' -]+(, [\w' -]+)*: ", line)) for line in lines) > len(lines) / 2
    before = (out / "raw" / "train.txt").read_bytes()
    bad = run_script(
        "prepare_corpus.py",
        ["--input", str(tmp_path / "x.txt"), "--wordnet-headwords", "--output-dir", str(out)],
    )
    assert (
        bad.returncode == 2
        and "--wordnet-headwords" in bad.stderr
        and "--wordnet-glosses" in bad.stderr
    )
    assert (out / "raw" / "train.txt").read_bytes() == before  # the refused run wrote nothing


def test_prepare_corpus_end_to_end(tmp_path):
    from corpus_fixtures import tiny_corpus_lines

    src = tmp_path / "corpus.txt"
    src.write_text("\n".join(tiny_corpus_lines(400)) + "\n\n")
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(src),
            "--output-dir",
            str(tmp_path / "out"),
            "--vocab-size",
            "150",
            "--model-type",
            "bpe",
        ],
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 empty lines skipped" in proc.stdout
    for f in ("spm.model", "data-bin/dict.txt", "data-bin/train.bin", "data-bin/valid.idx"):
        assert (tmp_path / "out" / f).is_file(), f
    # the split and tokenized text are gone once the data-bin is written
    assert not (tmp_path / "out" / "raw").exists() and not (tmp_path / "out" / "tok").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "config,criterion",
    [
        ("roberta_base_hc", "mlm_hard_correction"),
        ("roberta_base_hc", "mlm_soft_reg"),
        ("roberta_base_mlm", "mlm_plain"),
    ],
)
def test_hydra_config_trains(data_bin, synonym_table, tmp_path, config, criterion):
    """examples/mlm/config/*.yaml with fairseq-hydra-train, shrunk to a tiny model."""
    from fairseq_runs import hydra_train
    from repo_paths import REPO

    proc = hydra_train(
        REPO / "examples" / "mlm" / "config",
        config,
        [
            f"task.data={data_bin}",
            f"criterion._name={criterion}",
            f"criterion.synonym_table={synonym_table}",
            "model.encoder_layers=2",
            "model.encoder_embed_dim=32",
            "model.encoder_ffn_embed_dim=64",
            "model.encoder_attention_heads=2",
            "model.max_positions=64",
            "task.tokens_per_sample=64",
            "optimization.max_update=2",
            "optimization.update_freq=[1]",
            "dataset.batch_size=4",
            f"checkpoint.save_dir={tmp_path / 'ck'}",
            f"common.tensorboard_logdir={tmp_path / 'tb'}",
        ],
        tmp_path / "run",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert (tmp_path / "ck" / "checkpoint_last.pt").is_file()
    assert "pred_corr_ratio" in out and "num_updates=2" in out
    if criterion == "mlm_soft_reg":
        assert "sr_loss" in out


@pytest.mark.slow
def test_mlm_shell_recipe(data_bin, synonym_table, tmp_path):
    from command_runs import run_recipe

    # the recipe's default arch (the plugin's RoBERTa), shrunk
    proc = run_recipe(
        "mlm/pretrain.sh",
        [
            str(data_bin),
            "mlm_soft_reg",
            "--cpu",
            *TINY_ROBERTA[2:],
            "--max-update",
            "2",
            "--log-interval",
            "1",
            "--warmup-updates",
            "1",
        ],
        tmp_path,
        SAVE_DIR=str(tmp_path / "ck"),
        MAX_SENTENCES="4",
        UPDATE_FREQ="1",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "sr_loss=" in out and (tmp_path / "ck" / "checkpoint_last.pt").is_file()


def test_prefetching_threads_stop_before_the_interpreter_exits():
    """fairseq's BufferedIterator keeps collating batches in a daemon thread after training ends
    mid-epoch; the exit hook lets it finish the batch in hand and stop (a thread stopped inside
    C++ code during finalization aborts the process with exit code 134)."""
    import threading
    import time

    from fairseq.data.iterators import BufferedIterator

    from truneg_fairseq.compat import _stop_prefetch_threads

    class Slow:
        def __len__(self):
            return 1000

        def __iter__(self):
            for i in range(1000):
                time.sleep(0.01)  # a batch being collated
                yield i

    it = BufferedIterator(4, Slow())
    assert next(it) == 0  # the consumer thread starts and fills the buffer
    consumer = it._consumer
    assert consumer.is_alive()
    assert _stop_prefetch_threads(timeout=5.0) == 1
    assert not consumer.is_alive() and consumer.count < 1000
    assert not [t for t in threading.enumerate() if t is consumer]
