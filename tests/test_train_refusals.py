"""Bad input met inside fairseq's own commands (fairseq-train, fairseq-hydra-train, a spawned
training worker) ends in one line of fairseq's log format and exit status 1, with no traceback;
an error that is no refusal of the plugin keeps its traceback (compat/refusals.py)."""

import re
import shutil

import pytest
from fairseq_runs import TINY_ROBERTA, fairseq_train, free_port, hydra_train
from repo_paths import REPO

LINE = r"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \| ERROR \| {command} \| {message}.*"


def _refused(proc, message, command="fairseq_cli.train", stderr=None):
    """The one ERROR line ``proc`` ended with (``stderr``: where it was written, when not
    ``proc.stderr``), which holds ``message``."""
    stderr = proc.stderr if stderr is None else stderr
    assert proc.returncode == 1, stderr[-3000:]
    assert "Traceback" not in proc.stdout + stderr, stderr[-3000:]
    assert stderr.count(message) == 1, stderr[-3000:]
    line = next(line for line in stderr.splitlines() if message in line)
    assert re.fullmatch(LINE.format(command=command, message=re.escape(message)), line), line
    assert "begin training epoch" not in proc.stdout  # refused before training
    return line


def _empty_table(data_bin, path):
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable

    SynonymTable.empty(Dictionary.load(str(data_bin / "dict.txt")).symbols).save(path)
    return path


HC = [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--max-update", "1"]


def test_a_data_index_that_does_not_fit_its_bin_ends_fairseq_train_in_one_line(data_bin, tmp_path):
    data = tmp_path / "data-bin"
    shutil.copytree(data_bin, data)
    bin_file = data / "valid.bin"
    bin_file.write_bytes(bin_file.read_bytes()[:-8])
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    proc = fairseq_train(data, tmp_path / "run", args, check=False, cli=True)
    line = _refused(proc, f"{data}/valid.idx does not describe {bin_file}")
    assert line.endswith(
        "binarize the data again (scripts/prepare_corpus.py or fairseq-preprocess)"
    )


def test_a_synonym_table_of_no_pairs_ends_fairseq_train_in_one_line(data_bin, tmp_path):
    table = _empty_table(data_bin, tmp_path / "empty.npz")
    args = [*HC, "--synonym-table", str(table)]
    proc = fairseq_train(data_bin, tmp_path / "run", args, check=False, cli=True)
    line = _refused(proc, f"synonym table {table} holds 0 pairs")
    assert "--criterion mlm_hard_correction would train as plain masked LM" in line


def test_a_synonym_table_of_no_pairs_ends_fairseq_hydra_train_in_one_line(data_bin, tmp_path):
    table = _empty_table(data_bin, tmp_path / "empty.npz")
    sizes = ("encoder_layers=2", "encoder_embed_dim=32", "encoder_ffn_embed_dim=64")
    proc = hydra_train(
        REPO / "examples" / "mlm" / "config",
        "roberta_base_hc",
        [
            f"task.data={data_bin}",
            f"criterion.synonym_table={table}",
            *(f"model.{s}" for s in sizes),
            "model.encoder_attention_heads=2",
            "model.max_positions=64",
            "task.tokens_per_sample=64",
            f"checkpoint.save_dir={tmp_path / 'run'}",
        ],
        tmp_path / "hydra",
    )
    _refused(proc, f"synonym table {table} holds 0 pairs", command="fairseq_cli.hydra_train")
    assert "Error executing job" not in proc.stderr


def test_an_error_that_is_no_refusal_keeps_its_traceback(data_bin, tmp_path):
    """fairseq's own check of the model's sizes (an AssertionError): not the plugin's refusal."""
    args = [*TINY_ROBERTA, "--encoder-attention-heads", "3", "--criterion", "masked_lm"]
    proc = fairseq_train(data_bin, tmp_path / "run", args, check=False, cli=True)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.rstrip().endswith("AssertionError: embed_dim must be divisible by num_heads")
    assert " | ERROR | " not in proc.stderr


def test_a_refusal_in_a_spawned_worker_is_one_line(data_bin, tmp_path, monkeypatch, capfd):
    """fairseq-train starts one worker per GPU (``torch.multiprocessing.spawn``); here one worker
    on the CPU (fairseq counts the GPUs to decide how many: one is counted), whose refusal it
    says itself, while the launcher ends with status 1 and no traceback of its own."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    table = _empty_table(data_bin, tmp_path / "empty.npz")
    dist = ["--distributed-world-size", "1", "--distributed-backend", "gloo"]
    dist += ["--distributed-init-method", f"tcp://127.0.0.1:{free_port()}"]
    args = [*HC, "--synonym-table", str(table), *dist]
    proc = fairseq_train(data_bin, tmp_path / "run", args, check=False)
    worker = capfd.readouterr().err  # the worker's stderr is the process's own
    said = f"synonym table {table} holds 0 pairs"
    assert said in worker and said not in proc.stderr  # said by the worker, once
    _refused(proc, said, stderr=worker + proc.stderr)


def test_what_is_a_refusal_and_how_it_is_said():
    from fairseq.data.indexed_dataset import MMapIndexedDataset  # noqa: F401

    from truneg_fairseq.compat import DataIndexError, is_refusal
    from truneg_fairseq.compat.refusals import refusal_line
    from truneg_fairseq.errors import FlagError, SynonymTableError

    for exc in (FlagError("x"), SynonymTableError("x"), DataIndexError("x")):
        assert is_refusal(exc)
    for exc in (ValueError("x"), AssertionError("x"), KeyError("x"), SystemExit(1)):
        assert not is_refusal(exc)
    # raised again by torch's DataLoader from a worker: the worker's traceback is left out
    reraised = SynonymTableError(
        "Caught SynonymTableError in DataLoader worker process 0.\n"
        "Original Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "truneg_fairseq.errors.SynonymTableError: table t.npz holds 0 pairs: rebuild it\n"
    )
    line = refusal_line(reraised, "fairseq_cli.train")
    assert re.fullmatch(
        LINE.format(command="fairseq_cli.train", message="table t.npz holds 0 pairs: rebuild it"),
        line,
    )
    assert line.endswith("rebuild it")


@pytest.mark.parametrize(
    "flags, said",
    [
        (
            ["--criterion", "mlm_hard_correction"],
            "--criterion mlm_hard_correction needs --synonym-table FILE",
        ),
        (["--criterion", "electra"], "--criterion electra needs an ELECTRA model"),
    ],
)
def test_flag_refusals_of_a_criterion_are_one_line_in_process(data_bin, tmp_path, flags, said):
    proc = fairseq_train(data_bin, tmp_path / "run", [*TINY_ROBERTA, *flags], check=False)
    _refused(proc, said)
