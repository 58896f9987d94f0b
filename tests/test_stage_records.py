"""What made a finished stage (truneg_fairseq.outputs.stages): a stage's description follows
its flags and the contents of the files and data-bins it reads, not their names or where the
work directory lies, and leaves its own outputs out; the shell form answers as recipes need."""

import os
import shutil
import subprocess
import sys

from repo_paths import REPO

from truneg_fairseq.outputs import stages


def _work(tmp_path):
    work = tmp_path / "work"
    (work / "data-bin").mkdir(parents=True)
    (work / "data-bin" / "dict.txt").write_text("a 1\nb 1\n")
    (work / "data-bin" / "train.bin").write_bytes(b"\0" * 100)
    (work / "data-bin" / "preprocess.log").write_text("log\n")
    return work


def cmd(work, lr="1e-3"):
    return ["fairseq-train", str(work / "data-bin"), "--lr", lr, "--save-dir", str(work / "ck")]


def test_a_description_follows_flags_and_contents_not_names(tmp_path):
    work = _work(tmp_path)
    desc = stages.describe(cmd(work), [work / "ck"], root=str(work))
    assert desc[1] == "<root>/data-bin" and desc[-1] == "<output>"
    stages.record(str(work), "train", desc)
    assert stages.stale(str(work), "train", desc) is None
    # a moved work directory is the same stage; a log beside the data is not an input
    moved = tmp_path / "moved"
    shutil.move(work, moved)
    (moved / "data-bin" / "preprocess.log").write_text("another log\n")
    (moved / "data-bin" / "synonyms.npz").write_bytes(b"table")
    again = stages.describe(cmd(moved), [moved / "ck"], root=str(moved))
    assert stages.stale(str(moved), "train", again) is None
    # another flag, or other bytes of the same size in a shard: said, with what differs
    why = stages.stale(str(moved), "train", stages.describe(cmd(moved, "5e-4"), root=str(moved)))
    assert why.startswith("made from other inputs or flags") and "1e-3 -> 5e-4" in why
    (moved / "data-bin" / "train.bin").write_bytes(b"\1" * 100)
    why = stages.stale(str(moved), "train", stages.describe(cmd(moved), root=str(moved)))
    assert "train.bin 100:" in why
    assert stages.stale(str(moved), "other", again).startswith("no record of what made it")


def test_the_shell_form_checks_and_records(tmp_path):
    work = _work(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def shell(action, lr):
        args = [sys.executable, "-m", "truneg_fairseq.cli.stage_record", action, str(work / "ck")]
        args += ["warm-up", "--", *cmd(work, lr)]
        return subprocess.run(args, capture_output=True, text=True, env=env)

    assert shell("check", "1e-3").returncode == 3  # no record yet
    (work / "ck").mkdir()
    assert shell("record", "1e-3").returncode == 0
    assert (work / "ck" / stages.STAGES).is_file()
    assert shell("check", "1e-3").returncode == 0
    other = shell("check", "2e-3")
    assert other.returncode == 1 and "1e-3 -> 2e-3" in other.stderr
