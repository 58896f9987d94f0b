"""Outputs own only their own files: a re-run replaces what the earlier run recorded in its
marker and keeps everything else (the user's files, the run's own inputs); a marker that does
not match the disk is refused before anything is deleted; a kill mid-swap is put right."""

import json
import shutil
import subprocess
import sys

import pytest
from command_runs import run_script, snapshot
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import save_bert, wordpiece_vocab

from truneg_fairseq.outputs import MARKER, OutputDirError, atomic_dir, staged_entries


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text("\n".join(tiny_corpus_lines(300)) + "\n")
    return path


def test_prepare_corpus_rerun_keeps_the_spm_model_it_was_given_and_a_synonym_table(tmp_path, text):
    out = tmp_path / "work"
    args = ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    args += ["--keep-intermediates"]  # raw/ is what the test is about
    assert run_script("prepare_corpus.py", args).returncode == 0
    spm = (out / "spm.model").read_bytes()
    # the user builds the table where the docs say, then re-runs on the model already there
    proc = run_script(
        "build_synonym_table.py",
        [
            "--dict",
            str(out / "data-bin" / "dict.txt"),
            "--tokenizer",
            "sentencepiece",
            "--spm-model",
            str(out / "spm.model"),
            "--output",
            str(out / "data-bin" / "synonyms.npz"),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    table = (out / "data-bin" / "synonyms.npz").read_bytes()
    train = (out / "raw" / "train.txt").read_bytes()
    (out / "raw" / "train.txt").write_text("stale\n")  # an output of ours, changed since: refused
    before = snapshot(out)
    proc = run_script("prepare_corpus.py", [*args, "--spm-model", str(out / "spm.model")])
    assert (
        proc.returncode == 2
        and "raw/train.txt" in proc.stderr
        and "Move that directory away" in proc.stderr
    )
    assert snapshot(out) == before
    (out / "raw" / "train.txt").write_bytes(train)  # as the earlier run left it
    proc = run_script(
        "prepare_corpus.py", [*args, "--spm-model", str(out / "spm.model"), "--seed", "2"]
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "spm.model").read_bytes() != b"" and (
        out / "data-bin" / "synonyms.npz"
    ).read_bytes() == table
    assert not (
        out / "spm.vocab"
    ).exists()  # an output of the first run that this one does not write
    owned = json.loads((out / MARKER).read_text())["files"]
    assert (
        "spm.model" not in owned
        and "data-bin/synonyms.npz" not in owned
        and "raw/train.txt" in owned
    )
    # and once more: the model the user passed is theirs now, kept as it is
    spm_now = (out / "spm.model").read_bytes()
    assert (
        run_script("prepare_corpus.py", [*args, "--spm-model", str(out / "spm.model")]).returncode
        == 0
    )
    assert (out / "spm.model").read_bytes() == spm_now == spm


def test_prepare_corpus_refuses_an_input_it_would_overwrite(tmp_path, text):
    out = tmp_path / "work"
    args = ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    args += ["--keep-intermediates"]  # raw/ is what the test is about
    assert run_script("prepare_corpus.py", args).returncode == 0
    before = snapshot(out)
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(out / "raw" / "train.txt"),
            "--output-dir",
            str(out),
            "--vocab-size",
            "100",
            "--keep-intermediates",
        ],
    )
    assert (
        proc.returncode == 2 and "--input" in proc.stderr and "would be overwritten" in proc.stderr
    )
    assert snapshot(out) == before


def test_convert_hf_import_rerun_keeps_a_users_file(tmp_path):
    hf = tmp_path / "hf"
    save_bert(hf, vocab=wordpiece_vocab())
    out = tmp_path / "imported"
    assert run_script("convert_hf.py", ["import", str(hf), str(out)]).returncode == 0
    (out / "notes.md").write_text("my notes")
    (out / "runs").mkdir()
    (out / "runs" / "eval.txt").write_text("mine too")
    proc = run_script("convert_hf.py", ["import", str(hf), str(out), "--seed", "2"])
    assert proc.returncode == 0, proc.stderr
    assert (out / "notes.md").read_text() == "my notes" and (
        out / "runs" / "eval.txt"
    ).read_text() == "mine too"
    assert (out / "model.pt").is_file() and "notes.md" not in json.loads(
        (out / MARKER).read_text()
    )["files"]
    # importing from the output itself (the HF files copied there) would overwrite the source
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(hf / name, out / name)
    before = snapshot(out)
    proc = run_script("convert_hf.py", ["import", str(out), str(out)])
    assert (
        proc.returncode == 2 and "HF_DIR" in proc.stderr and "would be overwritten" in proc.stderr
    )
    assert snapshot(out) == before


def test_build_synonym_table_refuses_output_equal_to_dict(corpus_dir, tmp_path):
    d = tmp_path / "dict.txt"
    d.write_bytes((corpus_dir / "data-bin" / "dict.txt").read_bytes())
    proc = run_script(
        "build_synonym_table.py",
        [
            "--dict",
            str(d),
            "--tokenizer",
            "sentencepiece",
            "--spm-model",
            str(corpus_dir / "spm.model"),
            "--output",
            str(d),
        ],
    )
    assert proc.returncode == 2 and "--output" in proc.stderr and "--dict" in proc.stderr
    assert d.read_bytes() == (corpus_dir / "data-bin" / "dict.txt").read_bytes()


@pytest.mark.parametrize(
    "forgery", ["copied", "edited", "not_an_object", "no_files", "outside", "not_json"]
)
def test_a_forged_or_copied_marker_is_refused_and_nothing_is_deleted(tmp_path, forgery):
    mine = tmp_path / "mine"
    with atomic_dir(mine, "a command") as work:
        (work / "a.txt").write_text("written by a command")
    marker = (mine / MARKER).read_text()
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("the user's own a.txt")  # the same name, another file
    (out / "b.txt").write_text("the user's b.txt")
    text = {
        "copied": marker,
        "edited": marker.replace('"a.txt"', '"b.txt"'),
        "not_an_object": '["a command", "a.txt"]',
        "no_files": '{"command": "a command"}',
        "outside": json.dumps({"command": "a command", "files": {"../mine/a.txt": {"size": 20}}}),
        "not_json": '{"command": ',
    }[forgery]
    (out / MARKER).write_text(text)
    before = snapshot(out)
    with pytest.raises(OutputDirError) as e:
        with atomic_dir(out, "a command") as work:
            (work / "a.txt").write_text("new")
    assert (
        str(out) in str(e.value)
        and MARKER in str(e.value)
        and "Move that directory away" in str(e.value)
    )
    assert str(e.value).count("\n") == 0
    assert snapshot(out) == before and snapshot(mine)["a.txt"] == b"written by a command"
    with pytest.raises(OutputDirError, match="Move that directory away"):
        with staged_entries(out, "a command", ["a.txt"]) as stage:
            (stage / "a.txt").write_text("new")
    assert snapshot(out) == before


_CRASHER = """
import importlib.util, os, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location(  # the package alone: no torch to import
    "outputs", {path!r}, submodule_search_locations=[os.path.dirname({path!r})]
)
writers = importlib.util.module_from_spec(spec)
sys.modules["outputs"] = writers
spec.loader.exec_module(writers)
swap = sys.modules["outputs.swap"]
out, at = Path(sys.argv[1]), int(sys.argv[2])
moves = [0]
real_move = swap._move
def move(src, dst):  # the process dies (no clean-up runs) just before its AT-th rename
    if moves[0] == at:
        os._exit(9)
    moves[0] += 1
    real_move(src, dst)
swap._move = move
real_rmtree = swap.shutil.rmtree
def rmtree(p, *a, **k):  # or, with AT past the last rename, once the swap is done
    if ".old-" in str(p):
        os._exit(9)
    real_rmtree(p, *a, **k)
swap.shutil.rmtree = rmtree
with writers.{kind}(out, "a command", *{extra}) as stage:
    for i in range(6):
        (stage / "d" / f"n{{i}}.txt").parent.mkdir(exist_ok=True)
        (stage / "d" / f"n{{i}}.txt").write_text("new")
"""


def _old_set(out):
    return {f"d/o{i}.txt": b"old" for i in range(4)} | {f"d/n{i}.txt": b"old" for i in range(2)}


@pytest.mark.parametrize("kind", ["atomic_dir", "staged_entries"])
@pytest.mark.parametrize("at", [0, 1, 3, 6, 7, 9, 12, 99])
def test_a_crash_at_any_rename_of_the_swap_leaves_one_whole_set_after_recovery(tmp_path, kind, at):
    out = tmp_path / "out"
    extra = "[['d']]" if kind == "staged_entries" else "[]"
    with getattr(sys.modules[atomic_dir.__module__], kind)(out, "a command", *eval(extra)) as stage:
        (stage / "d").mkdir()
        for rel, data in _old_set(out).items():
            (stage / rel).write_bytes(data)
    (out / "d" / "users.txt").write_text("the user's")
    code = _CRASHER.format(
        kind=kind, extra=extra, path=sys.modules["truneg_fairseq.outputs"].__file__
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(out), str(at)], capture_output=True, text=True
    )
    assert proc.returncode in (0, 9), proc.stderr
    messages = []
    with getattr(sys.modules[atomic_dir.__module__], kind)(
        out, "a command", *eval(extra), log=messages.append
    ):
        got = {k: v for k, v in snapshot(out).items() if k != MARKER}
    new = {f"d/n{i}.txt": b"new" for i in range(6)}
    assert got in (
        {**_old_set(out), "d/users.txt": b"the user's"},
        {**new, "d/users.txt": b"the user's"},
    )
    assert proc.returncode == 0 or messages  # what was restored or removed is said
    assert not [
        p for p in tmp_path.rglob(".*") if p.name != MARKER and not p.name.endswith(".lock")
    ]
