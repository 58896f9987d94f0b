"""truneg-hf-train's output directory on a tiny local BERT: only a new or empty directory or the
command's own earlier run (never one holding an input); only the checkpoints the run listed are
rotated and resumed; each checkpoint records the run's settings and a resume with others is
refused; one run at a time (fairseq-train's --save-dir too); a damaged checkpoint, a full disk,
a missing input are one error each."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from command_runs import snapshot
from hf_fixtures import tiny_bert_and_texts
from repo_paths import REPO
from test_hf_trainer import base_args, expect_error

from truneg_fairseq.cli import hf_train
from truneg_fairseq.outputs import MARKER


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_bert_and_texts(tmp_path_factory.mktemp("hf_output_dir"))


def run_ok(argv, capsys):
    assert hf_train.main(argv) == 0
    return capsys.readouterr().out


def listed(out):
    return json.loads((out / MARKER).read_text())["checkpoints"]


def test_a_directory_of_the_users_is_refused_and_left_as_it_was(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    (out / "checkpoint-backup").mkdir(parents=True)
    (out / "checkpoint-backup" / "weights.bin").write_bytes(b"mine")
    (out / "config.json").write_text('{"mine": true}')
    before = snapshot(out)
    argv = base_args(tiny, out, "--max-steps", "2", "--save-steps", "1", "--save-total-limit", "1")
    expect_error(capsys, argv, f"--output-dir {out} already holds files", "new output directory")
    assert snapshot(out) == before
    # an existing file as --output-dir
    f = tmp_path / "file"
    f.write_text("x")
    expect_error(capsys, base_args(tiny, f), f"--output-dir {f} is a file")
    assert f.read_text() == "x"


def test_rotation_deletes_only_the_checkpoints_the_run_wrote(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    limit = ["--save-steps", "1", "--save-total-limit", "1"]
    run_ok(base_args(tiny, out, "--max-steps", "2", *limit), capsys)
    assert listed(out) == {"checkpoint-2": "complete"} and not (out / "checkpoint-1").exists()
    (out / "checkpoint-backup").mkdir()  # the user's, newer than checkpoint-2
    (out / "checkpoint-backup" / "weights.bin").write_bytes(b"mine")
    log = run_ok(base_args(tiny, out, "--max-steps", "4", *limit), capsys)
    assert re.search(r"resuming from \S+checkpoint-2\b", log)
    assert listed(out) == {"checkpoint-4": "complete"}
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-backup"]
    assert (out / "checkpoint-backup" / "weights.bin").read_bytes() == b"mine"
    # a checkpoint folder the run did not write where it would save one: refused before training
    (out / "checkpoint-6").mkdir()
    expect_error(capsys, base_args(tiny, out, "--max-steps", "6", *limit), "checkpoint-6 was not")
    assert listed(out) == {"checkpoint-4": "complete"}


def test_an_output_dir_holding_an_input_is_refused(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    run_ok(base_args(tiny, out, "--max-steps", "3", "--save-steps", "3"), capsys)
    ckpt = out / "checkpoint-3"
    before = snapshot(ckpt)
    argv = base_args(tiny, out, "--max-steps", "2", "--save-steps", "1", "--no-resume")
    argv[0] = str(ckpt)
    expect_error(capsys, [*argv, "--save-total-limit", "1"], f"holds the MODEL_DIR input {ckpt}")
    text = out / "more.txt"
    text.write_text("one more line of text\n")
    argv = base_args(tiny, out, "--max-steps", "2")
    argv[argv.index("--train") + 1] = str(text)
    expect_error(capsys, argv, f"holds the --train input {text}")
    assert snapshot(ckpt) == before
    # --no-resume into a directory with an earlier run's checkpoints: a new directory instead
    expect_error(capsys, base_args(tiny, out, "--no-resume"), "--no-resume: ", "checkpoint-3")


def test_a_resume_with_other_settings_is_refused(tiny, tmp_path, capsys):
    import shutil

    from hf_fixtures import save_bert

    out = tmp_path / "out"
    steps = ["--max-steps", "2", "--save-steps", "2"]
    run_ok(base_args(tiny, out, *steps), capsys)
    record = json.loads((out / "checkpoint-2" / "truneg_run.json").read_text())["settings"]
    assert record["objective"] == "hard_correction" and record["mask_prob"] == 0.3
    assert record["model"]["path"] == str(tiny / "bert") and record["synonym_table"]
    more = ["--max-steps", "4", "--save-steps", "2"]
    err = expect_error(
        capsys,
        base_args(tiny, out, *more, "--objective", "sent_kl", "--mask-prob", "0.4"),
        '--objective: recorded "hard_correction", given "sent_kl"',
        "--mask-prob: recorded 0.3, given 0.4",
        "--no-resume and a new --output-dir",
    )
    assert "checkpoint-2 was trained with other settings" in err
    # another model of the same sizes
    other = tmp_path / "other"
    save_bert(other, seed=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    argv = base_args(tiny, out, *more)
    expect_error(capsys, [str(other), *argv[1:]], "MODEL_DIR: recorded " + str(tiny / "bert"))
    assert not (out / "checkpoint-4").exists()
    # the same model under another path is the same model
    shutil.copytree(tiny / "bert", tmp_path / "copy")
    log = run_ok([str(tmp_path / "copy"), *argv[1:]], capsys)
    assert "resuming from" in log and (out / "checkpoint-4" / "truneg_run.json").is_file()


class NotATensor:
    """A Python object torch's weights-only loading refuses."""


@pytest.mark.parametrize("name", ["rng_state.pth", "optimizer.pt", "scheduler.pt"])
def test_a_checkpoint_file_holding_python_objects_is_one_error(tiny, tmp_path, capsys, name):
    out = tmp_path / "out"
    run_ok(base_args(tiny, out, "--max-steps", "1", "--save-steps", "1"), capsys)
    torch.save({"state": NotATensor()}, out / "checkpoint-1" / name)
    expect_error(
        capsys,
        base_args(tiny, out, "--max-steps", "2", "--save-steps", "1"),
        f"{out / 'checkpoint-1' / name} holds Python objects",
        "NotATensor",
        "--no-resume",
    )


def test_a_truncated_trainer_state_resumes_from_the_checkpoint_before(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    run_ok(base_args(tiny, out, "--max-steps", "2", "--save-steps", "1"), capsys)
    state = out / "checkpoint-2" / "trainer_state.json"
    state.write_text(state.read_text()[:50])  # a kill while it was written
    log = run_ok(base_args(tiny, out, "--max-steps", "3", "--save-steps", "1"), capsys)
    assert "trainer_state.json is not complete JSON" in log
    assert re.search(r"resuming from \S+checkpoint-1\b", log)
    assert json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())["global_step"] == 3
    assert json.loads(state.read_text())["global_step"] == 2  # saved again, whole


def test_a_missing_input_is_said_before_any_work(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    argv = base_args(tiny, out)
    argv[argv.index("--train") + 1] = str(tmp_path / "nofile.txt")
    expect_error(capsys, argv, f"--train {tmp_path / 'nofile.txt'} not found")
    assert not out.exists()  # no synonym table built first, none left behind
    argv = base_args(tiny, out, "--synonym-table", str(tmp_path / "none.npz"))
    expect_error(capsys, argv, "--synonym-table", "not found")
    assert not out.exists()


def _env():
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=f"{REPO}{os.pathsep}" + os.environ.get("PYTHONPATH", ""),
    )


def _limit_file_size():
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (96 << 10, 96 << 10))


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_is_one_error(tiny, tmp_path):
    """A real failed write: the command under a file-size limit smaller than the model's
    weights (and larger than the marker, the synonym table and the tokenizer files)."""
    out = tmp_path / "out"
    assert (tiny / "bert" / "model.safetensors").stat().st_size > 96 << 10
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "hf_train.py"),
         *base_args(tiny, out, "--max-steps", "1", "--save-steps", "1")],
        capture_output=True, text=True, env=_env(), timeout=120, preexec_fn=_limit_file_size,
    )  # fmt: skip
    err = proc.stderr
    assert proc.returncode == 2 and "Traceback" not in err and err.count("error:") == 1, err
    assert f"{out / 'checkpoint-1'}: writing failed (" in err and "File too large" in err, err
    assert re.search(r"MB free on that disk, .* takes about [\d.,]+ MB", err), err
    assert not (out / "checkpoint-1").exists() and listed(out) == {}


def _wait_for(path, proc, timeout=60):
    t0 = time.time()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.time() - t0 < timeout, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.slow
def test_two_runs_on_one_output_dir_one_error_and_a_killed_runs_lock_taken_over(
    tiny, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = base_args(tiny, out, "--max-steps", "100000", "--save-steps", "100000")
    cmd = [sys.executable, str(REPO / "scripts" / "hf_train.py")]
    first = subprocess.Popen(
        [*cmd, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()
    )
    try:
        _wait_for(tmp_path / ".out.lock", first)
        # a second run (this process) while the first trains: one error naming both
        expect_error(capsys, argv, f"{out} is being written by another run (pid {first.pid},")
        assert first.poll() is None  # the first run goes on
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    # the killed run's lock stays behind; the next run takes it over
    assert (tmp_path / ".out.lock").exists()
    log = run_ok(base_args(tiny, out, "--max-steps", "1"), capsys)
    assert f"removing the stale lock {tmp_path / '.out.lock'}" in log
    assert not (tmp_path / ".out.lock").exists()
