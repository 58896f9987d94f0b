"""A checkpoint records its training dictionary (fingerprint and symbols) and is loaded only with
that dictionary: a dict.txt of the same size in another order (6 of 132 entries swapped, the data
binarized with it) is one error naming the file and the first entry that differs, also when the
data directory the checkpoint records is gone; resuming fairseq-train on it too. A checkpoint
without the record (older, or fairseq's own) loads as before. A --data that is missing or has no
dict.txt is named as given by every command that loads a checkpoint, never the directory the
checkpoint records."""

import shutil

import pytest
import torch
from command_runs import run_script
from fairseq_runs import TINY_ROBERTA, fairseq_train

from truneg_fairseq.compat import RECORDS
from truneg_fairseq.compat.dictionary_record import fingerprint

TRAIN = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1", "--disable-validation"]


@pytest.fixture(scope="module")
def trained(data_bin, tmp_path_factory):
    """A checkpoint trained on a copy of the data-bin that is then removed, and a data-bin of
    the same dictionary with 6 entries swapped in pairs (its splits those of the original)."""
    work = tmp_path_factory.mktemp("dict_record")
    shutil.copytree(data_bin, work / "orig")
    fairseq_train(work / "orig", work / "run", TRAIN)
    shutil.copytree(work / "orig", work / "same")
    shutil.rmtree(work / "orig")  # the recorded data directory is gone
    lines = (work / "same" / "dict.txt").read_text().splitlines()
    for a, b in ((10, 11), (40, 90), (100, 131)):
        lines[a], lines[b] = lines[b], lines[a]
    shutil.copytree(work / "same", work / "swapped")
    (work / "swapped" / "dict.txt").write_text("\n".join(lines) + "\n")
    return work


def test_every_checkpoint_records_its_dictionary(trained):
    from fairseq.data import Dictionary

    state = torch.load(trained / "run" / "checkpoint_last.pt", weights_only=False)
    record = state["extra_state"][RECORDS]["dictionary"]
    d = Dictionary.load(str(trained / "same" / "dict.txt"))
    d.add_symbol("<mask>")  # as masked_lm adds it
    assert record["symbols"] == d.symbols and record["size"] == len(d) == 137
    assert record["fingerprint"] == fingerprint(d.symbols)


def test_evaluate_refuses_a_same_size_dictionary_in_another_order(trained):
    ck = trained / "run" / "checkpoint_last.pt"
    proc = run_script("evaluate_mlm.py", ["--data", str(trained / "swapped"), str(ck)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert f"--data {trained / 'swapped'}: its dict.txt is not the dictionary {ck}" in line
    assert "line 11 of dict.txt is" in line and "6 entries differ" in line, line
    assert "Give --data the data directory it was trained on" in line
    # the same dictionary elsewhere is honoured
    ok = run_script("evaluate_mlm.py", ["--data", str(trained / "same"), str(ck)])
    assert ok.returncode == 0, ok.stderr[-3000:]


def test_load_for_inference_checks_the_recorded_dictionary(trained, tmp_path):
    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference

    ck = trained / "run" / "checkpoint_last.pt"
    with pytest.raises(CheckpointError, match=r"line 11 of dict\.txt is '\S+' where"):
        load_for_inference(ck, str(trained / "swapped"))
    # no --data: the dict.txt found beside the checkpoint is checked too
    shutil.copy(ck, tmp_path / "checkpoint_last.pt")
    shutil.copy(trained / "swapped" / "dict.txt", tmp_path / "dict.txt")
    with pytest.raises(CheckpointError, match=r"dict\.txt \(the data directory beside .*Pass"):
        load_for_inference(tmp_path / "checkpoint_last.pt")
    # a checkpoint without the record loads as before (nothing to compare with)
    state = torch.load(ck, weights_only=False)
    del state["extra_state"][RECORDS]["dictionary"]
    torch.save(state, tmp_path / "old.pt")
    models, _, task = load_for_inference(tmp_path / "old.pt", str(trained / "swapped"))
    assert len(task.source_dictionary) == 137


def test_resuming_on_a_same_size_dictionary_in_another_order_is_one_line(trained, tmp_path):
    shutil.copytree(trained / "run", tmp_path / "run")
    args = [*TRAIN[:-3], "--max-update", "2"]
    proc = fairseq_train(trained / "swapped", tmp_path / "run", args, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "checkpoint_last.pt was trained with another dictionary than" in line, line
    assert "line 11 of" in line and "cannot continue" in line, line


@pytest.mark.parametrize(
    "script", ["evaluate_mlm.py", "convert_hf.py", "cline_hits.py", "squad_predict.py"]
)
@pytest.mark.parametrize("data", ["empty", "missing"])
def test_a_wrong_data_flag_is_named_not_the_recorded_directory(
    plain_checkpoint, data_bin, tmp_path, script, data
):
    """Every loading path resolves --data the same way: the error names the directory given."""
    given = tmp_path / data
    if data == "empty":
        given.mkdir()
    ck = str(plain_checkpoint)
    triplets = tmp_path / "t.tsv"
    triplets.write_text("a b c\ta b d\ta b e\n")
    args = {
        "evaluate_mlm.py": [ck, "--data", str(given)],
        "convert_hf.py": ["export", ck, str(tmp_path / "exported"), "--data", str(given)],
        "cline_hits.py": [
            ck,
            "--data",
            str(given),
            "--triplets",
            str(triplets),
            "--spm-model",
            str(data_bin.parent / "spm.model"),
        ],
        "squad_predict.py": [
            "--checkpoint",
            ck,
            "--data",
            str(given),
            "--output",
            str(tmp_path / "p.json"),
        ],
    }[script]
    proc = run_script(script, args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    want = (
        f"--data {given}: no such directory"
        if data == "missing"
        else f"--data {given} has no dict.txt"
    )
    assert want in proc.stderr and "Traceback" not in proc.stderr
    assert "recorded" not in proc.stderr and not (tmp_path / "exported").exists()
