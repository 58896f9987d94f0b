"""No command deletes or replaces what it did not write: conversions into a run directory, the
current directory, their own source or an HF directory; perturbations into their input; a re-run
and a concurrent run; a kill during the replacement. prepare_corpus.py: a second run on the same
output, a re-run that fails under a file-size limit, entries of the output it did not write; a
kill at any moment of a staged swap leaves one whole set once recovered."""

import json
from pathlib import Path

import pytest
from command_runs import run_script, snapshot
from failures import file_size_limit_of_child

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
    from truneg_fairseq.outputs import OutputDirError, atomic_dir

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
from truneg_fairseq.outputs import atomic_dir
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

    from truneg_fairseq.outputs import atomic_dir

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


def test_a_second_prepare_corpus_on_the_same_output_is_refused_and_deletes_nothing(tmp_path):
    from corpus_fixtures import tiny_corpus_lines

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(200)) + "\n")
    out = tmp_path / "work"
    first = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert first.returncode == 0, first.stderr
    before = snapshot(out)
    (tmp_path / ".work.lock").write_text("1")  # a run in progress (pid 1 is alive)
    second = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert second.returncode == 2 and "being written by another run (pid 1" in second.stderr
    assert snapshot(out) == before


def test_a_failed_prepare_corpus_rerun_leaves_the_earlier_outputs_whole(tmp_path):
    """The second run fails while training sentencepiece (its model file cannot be written):
    spm.* and data-bin/ of the first run stay as they were, no staging leftovers, and
    the error says what happened instead of blaming a --spm-model flag never given."""
    from corpus_fixtures import tiny_corpus_lines

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(300)) + "\n")
    out = tmp_path / "work"
    first = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert first.returncode == 0, first.stderr
    before = snapshot(out)
    other = tmp_path / "other.txt"
    other.write_text("\n".join(tiny_corpus_lines(400))[::-1] + "\n")  # another text: other outputs
    assert (
        other.stat().st_size < 60_000
    )  # raw/ fits under the limit, a sentencepiece model (~250 kB) does not
    second = run_script(
        "prepare_corpus.py",
        ["--input", str(other), "--output-dir", str(out), "--vocab-size", "100"],
        preexec_fn=file_size_limit_of_child(100_000),
    )
    assert second.returncode == 2
    assert "sentencepiece training could not write its model in " + str(out) + " (" in second.stderr
    assert (
        "--spm-model" not in second.stderr.split("choose another")[0]
        and "Traceback" not in second.stderr
    )
    assert snapshot(out) == before
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [
        ".truneg-output.json"
    ]


def test_prepare_corpus_never_replaces_entries_it_did_not_write(tmp_path):
    from corpus_fixtures import tiny_corpus_lines

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(200)) + "\n")
    out = tmp_path / "work"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / "train.txt").write_text("my own data")  # where an output would go
    (out / "notes.txt").write_text("kept")
    proc = run_script(
        "prepare_corpus.py",
        ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
        + ["--keep-intermediates"],  # raw/train.txt among its outputs
    )
    assert (
        proc.returncode == 2
        and str(out / "raw" / "train.txt") in proc.stderr
        and "Move" in proc.stderr
    )
    assert (out / "raw" / "train.txt").read_text() == "my own data"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "raw"]
    # other files beside the outputs, or inside their directories, are fine, and stay
    (out / "raw" / "train.txt").rename(out / "raw" / "mine.txt")
    proc = run_script(
        "prepare_corpus.py",
        ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
        + ["--keep-intermediates"],  # raw/train.txt among its outputs
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "raw" / "mine.txt").read_text() == "my own data" and (
        out / "raw" / "train.txt"
    ).is_file()
    assert (out / "notes.txt").read_text() == "kept" and (out / "data-bin" / "dict.txt").is_file()
    record = json.loads((out / "data-bin" / "tokenizer_fingerprint.json").read_text())
    assert record["files"]["spm_model"]["path"] == str(
        out / "spm.model"
    )  # the final place, not the staging one


_ENTRIES = [f"e{i}" for i in range(300)]
_SWAPPER = """
import sys
from pathlib import Path
from truneg_fairseq.outputs import staged_entries
out = Path(sys.argv[1])
names = [f"e{i}" for i in range(300)]
print("ready", flush=True)
with staged_entries(out, "a command", names) as stage:
    for n in names[:250]:  # the new set has fewer entries than the old one
        (stage / n).write_text("new")
print("done", flush=True)
"""


def _one_whole_set(out: Path) -> str:
    present = {n: (out / n).read_text() for n in _ENTRIES if (out / n).exists()}
    if set(present) == set(_ENTRIES) and set(present.values()) == {"old"}:
        return "old"
    if set(present) == set(_ENTRIES[:250]) and set(present.values()) == {"new"}:
        return "new"
    return f"mixed: {sorted(set(present.values()))}, {len(present)} entries"


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.01, 0.02, 0.04, 0.08])
def test_a_kill_during_a_staged_swap_leaves_one_whole_set_after_recovery(tmp_path, delay):
    import signal
    import subprocess
    import sys
    import time

    from truneg_fairseq.outputs import staged_entries

    out = tmp_path / "out"
    with staged_entries(out, "a command", _ENTRIES) as stage:
        for n in _ENTRIES:
            (stage / n).write_text("old")
    (out / "mine.txt").write_text("not an output")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    messages = []
    with staged_entries(out, "a command", _ENTRIES, log=messages.append) as stage:
        assert _one_whole_set(out) in ("old", "new")  # recovered before anything is written
        (stage / "e0").write_text("next")
    assert (out / "e0").read_text() == "next" and (out / "mine.txt").read_text() == "not an output"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [
        ".truneg-output.json"
    ]
