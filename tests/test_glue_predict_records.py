"""GLUE predictions on other data: a fine-tuned checkpoint records its labels and task, and is
refused on another task's data or a reordered label dictionary; a full disk while writing
predictions is one error."""

import shutil

import pytest
import torch
from command_runs import run_script
from failures import full_disk_run
from fairseq_runs import TINY_ROBERTA, fairseq_train
from finetune_flags import sentence_prediction_args

# ---- GLUE predictions on other data ---------------------------------------------------------

GLUE_TASKS = ("SST-2", "RTE", "MNLI", "STS-B")


@pytest.fixture(scope="module")
def glue_bin(corpus_dir, data_bin, tmp_path_factory):
    from glue_fixtures import write_glue

    root = tmp_path_factory.mktemp("glue3")
    glue = write_glue(root / "glue", n_train=16, n_dev=8)
    out = root / "glue-bin"
    spm = ["--tokenizer", "sentencepiece", "--spm-model", str(corpus_dir / "spm.model")]
    proc = run_script(
        "prepare_glue.py",
        ["--glue-dir", str(glue), "--output-dir", str(out), "--tasks", *GLUE_TASKS]
        + ["--dict", str(data_bin / "dict.txt"), *spm],
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def sst2_checkpoint(glue_bin, tmp_path_factory):
    """fairseq-train's sentence_prediction on SST-2, one update: checkpoint_last.pt."""
    save = tmp_path_factory.mktemp("sst2") / "run"
    fairseq_train(
        glue_bin / "SST-2",
        save,
        sentence_prediction_args(TINY_ROBERTA[:-2], max_update=1),
    )
    return save / "checkpoint_last.pt"


def _predict(checkpoint, data, out):
    return run_script(
        "glue_predict.py",
        [str(checkpoint), "--data", str(data), "--output", str(out), "--device", "cpu"],
    )


def _labels_of(data):
    lines = (data / "label" / "dict.txt").read_text().splitlines()
    return [line.split()[0] for line in lines if not line.startswith("madeupword")]


def test_a_finetuned_checkpoint_records_its_labels_and_task(sst2_checkpoint, glue_bin, tmp_path):
    state = torch.load(sst2_checkpoint, weights_only=False)
    record = state["extra_state"]["truneg_records"]["sentence_prediction"]
    assert record["labels"] == _labels_of(glue_bin / "SST-2") and record["data_task"] == "SST-2"
    proc = _predict(sst2_checkpoint, glue_bin / "SST-2", tmp_path / "pred.txt")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set((tmp_path / "pred.txt").read_text().split()) <= {"0", "1"}


def test_a_full_disk_while_writing_predictions_is_one_error_and_no_file(
    sst2_checkpoint, glue_bin, tmp_path
):
    out = tmp_path / "out" / "pred.txt"
    out.parent.mkdir()
    argv = [sst2_checkpoint, "--data", glue_bin / "SST-2", "--device", "cpu", "--output", out]
    proc = full_disk_run("glue_predict.py", argv, out, 4)
    assert f"error: --output {out}" in proc.stderr


@pytest.mark.parametrize("task", ["RTE", "MNLI", "STS-B"])
def test_a_checkpoint_on_another_tasks_data_is_one_error(sst2_checkpoint, glue_bin, tmp_path, task):
    proc = _predict(sst2_checkpoint, glue_bin / task, tmp_path / "pred.txt")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        f"{sst2_checkpoint} on --data {glue_bin / task}: the checkpoint was fine-tuned on SST-2 "
        in (proc.stderr)
    )
    assert f"the data directory holds {task}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "pred.txt").exists()


def test_a_reordered_label_dictionary_is_one_error(sst2_checkpoint, glue_bin, tmp_path):
    data = tmp_path / "SST-2"
    shutil.copytree(glue_bin / "SST-2", data)
    lines = (data / "label" / "dict.txt").read_text().splitlines(keepends=True)
    (data / "label" / "dict.txt").write_text("".join([lines[1], lines[0], *lines[2:]]))
    proc = _predict(sst2_checkpoint, data, tmp_path / "pred.txt")
    assert proc.returncode == 2, proc.stderr[-2000:]
    labels = _labels_of(glue_bin / "SST-2")
    assert (
        f"the checkpoint's outputs are the labels {', '.join(labels)} in this order" in proc.stderr
    )
    assert "the same labels in another order" in proc.stderr and "Traceback" not in proc.stderr


def test_a_checkpoint_without_the_record_is_checked_for_what_can_be_seen(
    sst2_checkpoint, glue_bin, tmp_path
):
    state = torch.load(sst2_checkpoint, weights_only=False)
    del state["extra_state"]["truneg_records"]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    proc = _predict(old, glue_bin / "MNLI", tmp_path / "pred.txt")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "classification head has 2 outputs" in proc.stderr and "has 3 labels" in proc.stderr
    proc = _predict(old, glue_bin / "STS-B", tmp_path / "pred.txt")
    assert proc.returncode == 2 and "the checkpoint is a classifier" in proc.stderr
    proc = _predict(old, glue_bin / "SST-2", tmp_path / "pred.txt")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "records no label dictionary" in proc.stderr + proc.stdout
    assert "its labels cannot be checked" in proc.stderr + proc.stdout
