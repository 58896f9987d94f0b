"""GLUE preparation on fixture files in the official layouts, and fine-tuning on them."""

import re

import pytest

from glue_fixtures import write_glue
from truneg_fairseq.corpus import CorpusError
from truneg_fairseq.glue import TASKS, Tokenizer, prepare_task, read_split
from utils import run_script


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    return write_glue(tmp_path_factory.mktemp("glue"))


@pytest.mark.parametrize("name", list(TASKS))
def test_read_every_task_layout(glue_dir, name):
    task = TASKS[name]
    exs, skipped = read_split(task, glue_dir / task.folder / task.splits[0][1])
    assert len(exs) == 24
    assert skipped == (1 if name == "QQP" else 0)  # the malformed QQP row is counted, not kept
    assert exs[0].text1.startswith("the farmer")
    assert (exs[0].text2 is None) == (task.sentence2 is None)
    if name == "MNLI":
        assert exs[1].label == "neutral" and exs[0].text2.startswith('"')  # stray quote kept as text
    if name == "STS-B":
        assert float(exs[5].label) == 5.0
    if name == "CoLA":
        assert exs[1].label == "1"


def test_missing_split_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="RTE.*dev.tsv not found"):
        read_split(TASKS["RTE"], tmp_path / "RTE" / "dev.tsv")


def test_prepare_all_tasks_cli(glue_dir, corpus_dir, data_bin, tmp_path):
    out = tmp_path / "glue-bin"
    proc = run_script("prepare_glue.py", ["--glue-dir", str(glue_dir), "--output-dir", str(out), "--dict",
                                          str(data_bin / "dict.txt"), "--tokenizer", "sentencepiece",
                                          "--spm-model", str(corpus_dir / "spm.model")])
    assert proc.returncode == 0, proc.stderr
    assert "QQP train.tsv: skipped 1 malformed rows" in proc.stdout
    for name, task in TASKS.items():
        base = out / name
        assert (base / "input0" / "train.bin").is_file()
        assert (base / "input1").is_dir() == (task.sentence2 is not None)
        assert (base / "input0" / "dict.txt").read_text() == (data_bin / "dict.txt").read_text()
        if name == "STS-B":
            assert (base / "label" / "valid.label").read_text().split()[5] == "5.000"
        else:
            assert (base / "label" / "dict.txt").is_file()
    assert (out / "MNLI" / "input0" / "valid1.bin").is_file()  # dev_mismatched
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary folders left
