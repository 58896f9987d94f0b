"""No command deletes or replaces what it did not write: conversions into a run directory, the
current directory, their own source or an HF directory; perturbations into their input; a re-run
and a concurrent run; a kill during the replacement."""

import pytest
from command_runs import run_script, snapshot

# ---- no command deletes what it did not write ------------------------------------------------


@pytest.mark.parametrize(
    "case", ["export_into_run_dir", "import_into_cwd", "import_over_source", "export_over_hf"]
)
def test_outputs_never_replace_what_the_command_did_not_write(
    imported_wordpiece, plain_checkpoint, data_bin, tmp_path, case
):
    import shutil

    if case == "export_into_run_dir":  # export run1/checkpoint_last.pt run1
        run = tmp_path / "run1"
        shutil.copytree(plain_checkpoint.parent, run)
        target, args = (
            run,
            [
                "export",
                str(run / "checkpoint_last.pt"),
                str(run),
                "--data",
                str(data_bin),
                "--spm-model",
                str(data_bin.parent / "spm.model"),
            ],  # fmt: skip
        )
    elif case == "import_into_cwd":  # import HF .
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        (cwd / "notes.txt").write_text("mine")
        target, args = cwd, ["import", str(imported_wordpiece / "hf"), "."]
    elif case == "import_over_source":  # output = input
        src = tmp_path / "hf"
        shutil.copytree(imported_wordpiece / "hf", src)
        target, args = src, ["import", str(src), str(src)]
    else:  # export into a HuggingFace directory that the export did not write
        hf = tmp_path / "hf"
        shutil.copytree(imported_wordpiece / "hf", hf)
        target, args = hf, ["export", str(imported_wordpiece / "out" / "model.pt"), str(hf)]
    before = snapshot(target)
    proc = run_script(
        "convert_hf.py", args, cwd=str(target if case == "import_into_cwd" else tmp_path)
    )
    assert proc.returncode == 2, proc.stderr
    assert "already holds" in proc.stderr and "never deletes anything else" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(target) == before
    assert not [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


def test_perturb_into_its_input_keeps_the_original(tmp_path):
    from glue_fixtures import write_glue

    task_dir = write_glue(tmp_path / "g") / "RTE"
    before = snapshot(task_dir)
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task_dir), str(task_dir)])
    assert proc.returncode == 2 and "is the input" in proc.stderr
    proc = run_script(
        "perturb.py", ["glue", "--task", "RTE", str(task_dir), str(tmp_path / "g" / "SST-2")]
    )
    assert proc.returncode == 2 and "already holds" in proc.stderr
    assert snapshot(task_dir) == before


def test_rerun_replaces_its_own_output_and_another_run_is_locked_out(imported_wordpiece, tmp_path):
    from truneg_fairseq.io_utils import OutputDirError, atomic_dir

    out = tmp_path / "out"
    for version in ("one", "two"):
        with atomic_dir(out, "a command") as work:
            (work / "v.txt").write_text(version)
    assert (out / "v.txt").read_text() == "two"
    with pytest.raises(OutputDirError, match="already holds the output of `a command`"):
        with atomic_dir(out, "another command"):
            pass
    lock = tmp_path / ".out.lock"
    lock.write_text("1")  # pid 1 is alive: another run holds the directory
    with pytest.raises(OutputDirError, match=r"being written by another run \(pid 1"):
        with atomic_dir(out, "a command"):
            pass
    lock.write_text("999999999")  # a run that ended without removing its lock
    with atomic_dir(out, "a command") as work:
        (work / "v.txt").write_text("three")
    assert (out / "v.txt").read_text() == "three" and not lock.exists()


_REPLACER = """
import sys, time
from pathlib import Path
from truneg_fairseq.io_utils import atomic_dir
out = Path(sys.argv[1])
print("ready", flush=True)
with atomic_dir(out, "a command") as work:
    for i in range(200):
        (work / f"f{i}.txt").write_text("new" * 1000)
print("done", flush=True)
"""


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.04])
def test_a_kill_during_replacement_leaves_one_whole_directory(tmp_path, delay):
    import signal
    import subprocess
    import sys
    import time

    from truneg_fairseq.io_utils import atomic_dir

    out = tmp_path / "out"
    with atomic_dir(out, "a command") as work:
        for i in range(200):
            (work / f"f{i}.txt").write_text("old" * 1000)
    proc = subprocess.Popen(
        [sys.executable, "-c", _REPLACER, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)  # somewhere in the writing or the renames
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def whole(d):
        texts = {(d / f"f{i}.txt").read_text() for i in range(200)} if d.is_dir() else set()
        return texts in ({"old" * 1000}, {"new" * 1000})

    # the files are replaced one by one: the next run first puts an interrupted swap right (one
    # whole set, old or new, in the output), then writes; no leftover remains
    with atomic_dir(out, "a command") as work:
        assert whole(out)
        (work / "f0.txt").write_text("next")
    assert (out / "f0.txt").read_text() == "next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
