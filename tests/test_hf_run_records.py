"""truneg-hf-train deletes, replaces and resumes only the folders carrying its own run's record:
a name the run marker lists that is a user's folder, a link, or another run's checkpoint is one
error before any work and is left as it was; a forged trainer_state.json or truneg_run.json is
one error naming the file, never a traceback or a run taken as finished."""

import json
import shutil

import pytest
from command_runs import snapshot
from hf_fixtures import tiny_bert_and_texts
from test_hf_trainer import base_args, expect_error

from truneg_fairseq.cli import hf_train
from truneg_fairseq.hf import output_dir as outdir
from truneg_fairseq.outputs import MARKER

STEPS = ["--save-steps", "1", "--save-total-limit", "1"]


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """A tiny BERT and a finished run of one update with its checkpoint-1."""
    base = tmp_path_factory.mktemp("hf_run_records")
    tiny = tiny_bert_and_texts(base)
    out = base / "run"
    assert hf_train.main(base_args(tiny, out, "--max-steps", "1", *STEPS)) == 0
    return tiny, out


def copy_run(one_run, tmp_path):
    tiny, out = one_run
    dest = tmp_path / "out"
    shutil.copytree(out, dest, symlinks=True)
    return tiny, dest


def test_each_checkpoint_carries_the_run_id_of_its_marker(one_run):
    _, out = one_run
    run = json.loads((out / MARKER).read_text())["run"]
    record = json.loads((out / "checkpoint-1" / "truneg_run.json").read_text())
    assert record["command"] == "truneg-hf-train" and record["run"] == run and len(run) == 16
    assert record["settings"]["objective"] == "hard_correction"


@pytest.mark.parametrize("kind", ["user folder", "link", "another run's"])
def test_a_listed_name_that_is_not_the_runs_is_refused_and_left_as_it_was(
    one_run, tmp_path, capsys, kind
):
    tiny, out = copy_run(one_run, tmp_path)
    ckpt = out / "checkpoint-1"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(ckpt, elsewhere)  # a whole checkpoint, out of the directory
    if kind == "user folder":
        ckpt.mkdir()
        (ckpt / "notes.txt").write_text("my notes")
        said = f"{ckpt} holds no readable truneg_run.json of this run"
    elif kind == "link":
        ckpt.symlink_to(elsewhere, target_is_directory=True)
        said = f"{ckpt} is a symbolic link"
    else:  # the same files with another run's record
        shutil.copytree(elsewhere, ckpt)
        record = json.loads((ckpt / "truneg_run.json").read_text())
        (ckpt / "truneg_run.json").write_text(json.dumps({**record, "run": "0" * 16}))
        said = f"{ckpt}'s truneg_run.json is another run's"
    before, kept = snapshot(out), snapshot(elsewhere)
    argv = base_args(tiny, out, "--max-steps", "3", *STEPS)
    expect_error(capsys, argv, said, "nothing was changed", "Move it out of")
    assert snapshot(out) == before and snapshot(elsewhere) == kept
    assert ckpt.is_symlink() == (kind == "link")


def test_rotation_and_a_save_never_delete_a_folder_without_the_runs_record(one_run, tmp_path):
    """The checks of the library functions themselves (a folder that lost its record while the
    run went on): a save over it is refused, a rotation forgets it and leaves it."""
    from truneg_fairseq.errors import OutputDirError

    _, out = copy_run(one_run, tmp_path)
    ckpt = out / "checkpoint-1"
    (ckpt / "truneg_run.json").unlink()
    with pytest.raises(OutputDirError, match="nothing was deleted"):
        outdir.begin_checkpoint(out, "checkpoint-1")
    outdir.remove(out, "checkpoint-1")
    assert (ckpt / "model.safetensors").is_file() and outdir.checkpoints(out) == {}
    # a folder the run made, empty (a save killed before its record): the run's
    (out / "checkpoint-2").mkdir()
    outdir.note(out, "checkpoint-2", "saving")
    outdir.begin_checkpoint(out, "checkpoint-2")
    assert outdir.not_ours(out, "checkpoint-2") == ""
    assert outdir.checkpoints(out) == {"checkpoint-2": "saving"}


@pytest.mark.parametrize(
    "file, key, value, said",
    [
        ("trainer_state.json", "global_step", "2", 'global_step is "2", not a whole number'),
        ("trainer_state.json", "global_step", 1e300, "global_step is 1e+300, not a whole"),
        ("trainer_state.json", "global_step", 2**60, "not a whole number of updates"),
        ("truneg_run.json", "settings", [1, 2], "its settings are list, not an object"),
    ],
)
def test_a_forged_record_is_one_error_naming_the_file(
    one_run, tmp_path, capsys, file, key, value, said
):
    tiny, out = copy_run(one_run, tmp_path)
    path = out / "checkpoint-1" / file
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, key: value}))
    before = snapshot(out)
    err = expect_error(capsys, base_args(tiny, out, "--max-steps", "2", *STEPS), str(path), said)
    assert "Move " in err and "nothing was changed" in err
    assert snapshot(out) == before
