"""Bad inputs get a counted skip or one clear error naming the file: GLUE rows, corpora, SQuAD
files, checkpoints, WordNet provisioning, synonym tables; outputs keep the usual permissions."""

import json
import os
import stat

import pytest
from command_runs import run_script
from glue_fixtures import write_glue

from truneg_fairseq.data.corpus_steps import CorpusError
from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted

# --- GLUE rows ------------------------------------------------------------------------------


def _append(path, rows):
    with open(path, "a") as f:
        f.write("".join(r + "\n" for r in rows))


def test_glue_malformed_rows_counted_per_reason(tmp_path):
    glue = write_glue(tmp_path, n_train=40)
    _append(
        glue / "SST-2" / "train.tsv",
        ["the farmer will stay\tat home .\t1", "a good film\t2", "\t1"],
    )
    _append(
        glue / "RTE" / "train.tsv",
        ["9\tthe pilot is here .\tthe pilot is here .\tnot_entailment\textra"],
    )
    _append(glue / "CoLA" / "train.tsv", ["gj04\t1\t\tthe farmer will\tstay ."])
    _append(glue / "STS-B" / "train.tsv", ["1\tg\tf\t2012\t1\tn\tn\ta b\tc d\t7.5"])
    exs, why = read_split_counted(TASKS["SST-2"], glue / "SST-2" / "train.tsv")
    assert len(exs) == 40 and why == {"too_many_columns": 1, "unknown_label": 1, "empty_field": 1}
    assert {e.label for e in exs} == {"0", "1"}
    exs, why = read_split_counted(TASKS["RTE"], glue / "RTE" / "train.tsv")
    assert why == {"too_many_columns": 1} and {e.label for e in exs} == {
        "entailment",
        "not_entailment",
    }
    exs, why = read_split_counted(TASKS["CoLA"], glue / "CoLA" / "train.tsv")
    assert why == {"too_many_columns": 1} and all(e.text1.endswith(".") for e in exs)
    assert (
        sum(read_split_counted(TASKS["STS-B"], glue / "STS-B" / "train.tsv")[1].values()) == 1
    )  # score outside [0, 5]


def test_glue_too_many_malformed_rows_is_an_error(tmp_path):
    glue = write_glue(tmp_path, n_train=40)
    _append(
        glue / "MNLI" / "train.tsv",
        [f"{i}\t1\t1e\tfiction\tx\ty\tx\ty\ta\tb\tmaybe\tmaybe" for i in range(12)],
    )
    with pytest.raises(
        CorpusError, match=r"train.tsv: 12 of 52 rows are malformed \(unknown label: 12\)"
    ):
        read_split_counted(TASKS["MNLI"], glue / "MNLI" / "train.tsv")
    exs, n = read_split_counted(TASKS["MNLI"], glue / "MNLI" / "train.tsv", max_skip_fraction=0.5)
    assert (len(exs), sum(n.values())) == (40, 12)


def test_prepare_glue_logs_reasons_and_honours_threshold(tmp_path, corpus_dir, data_bin):
    glue = write_glue(tmp_path / "glue", n_train=40)
    _append(
        glue / "SST-2" / "train.tsv", [f"a film\tnot_a_label_{i}" for i in range(11)] + ["x\ty\t1"]
    )
    common = [
        "--glue-dir",
        str(glue),
        "--tasks",
        "SST-2",
        "--dict",
        str(data_bin / "dict.txt"),
        "--tokenizer",
        "sentencepiece",
        "--spm-model",
        str(corpus_dir / "spm.model"),
    ]
    proc = run_script("prepare_glue.py", common + ["--output-dir", str(tmp_path / "a")])
    assert (
        proc.returncode != 0
        and "12 of 52 rows are malformed" in proc.stderr
        and "--max-skip-fraction" in proc.stderr
    )
    assert not (tmp_path / "a" / "SST-2").exists()
    proc = run_script(
        "prepare_glue.py",
        common + ["--output-dir", str(tmp_path / "b"), "--max-skip-fraction", "0.3"],
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "SST-2 train.tsv: skipped 12 malformed rows (too many columns: 1, unknown label: 11)"
        in proc.stdout
    )
    meta = json.loads((tmp_path / "b" / "SST-2" / "meta.json").read_text())
    assert meta["skipped_reasons"]["train"] == {"too_many_columns": 1, "unknown_label": 11}
    label_dict = (tmp_path / "b" / "SST-2" / "label" / "dict.txt").read_text().split()[::2]
    assert sorted(w for w in label_dict if not w.startswith("madeupword")) == ["0", "1"]


# --- output directories ---------------------------------------------------------------------


def test_atomic_dir_follows_umask(tmp_path):
    from truneg_fairseq.io_utils import atomic_dir

    old = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "out", "a command") as work:
            (work / "f.txt").write_text("x")
        (tmp_path / "ref").mkdir()
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "out").stat().st_mode)
    assert mode == 0o755 == stat.S_IMODE((tmp_path / "ref").stat().st_mode)
    assert stat.S_IMODE((tmp_path / "out" / "f.txt").stat().st_mode) == 0o644


# --- corpora --------------------------------------------------------------------------------


def _corpus_lines(n=300):
    from corpus_fixtures import tiny_corpus_lines

    return tiny_corpus_lines(n)


@pytest.mark.parametrize("kind", ["nul", "latin1"])
def test_prepare_corpus_refuses_binary_and_non_utf8(tmp_path, kind):
    lines = [line.encode() for line in _corpus_lines()]
    lines[7] = (
        b"\x00\x01\x02 binary \x00" if kind == "nul" else "the caf\xe9 is main .".encode("latin-1")
    )
    src = tmp_path / "corpus.bin"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "work"
    proc = run_script(
        "prepare_corpus.py", ["--input", str(src), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert proc.returncode != 0
    assert (
        f"{src}, line 8: " + ("NUL byte" if kind == "nul" else "not UTF-8 (byte 0xe9 at column 8)")
        in proc.stderr
    )
    assert not out.exists()  # no raw/, tok/, spm.* or data-bin/


def test_prepare_corpus_reads_gzip(tmp_path):
    import gzip

    src = tmp_path / "corpus.txt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write("\n".join(_corpus_lines()) + "\n")
    out = tmp_path / "work"
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(src),
            "--output-dir",
            str(out),
            "--vocab-size",
            "100",
            "--model-type",
            "bpe",
        ],
    )
    assert proc.returncode == 0, proc.stderr
    assert "read 300 non-empty lines" in proc.stdout
    assert (out / "raw" / "train.txt").read_text().count("the ") > 100  # text, not gzip bytes
    assert (out / "data-bin" / "train.bin").is_file()


def test_prepare_corpus_failure_leaves_nothing(tmp_path):
    src = tmp_path / "corpus.txt"
    src.write_text("\n".join(_corpus_lines(20)) + "\n")
    out = tmp_path / "work"
    # sentencepiece refuses a vocabulary smaller than the corpus's character set, after raw/ is written
    proc = run_script(
        "prepare_corpus.py", ["--input", str(src), "--output-dir", str(out), "--vocab-size", "3"]
    )
    assert proc.returncode != 0 and "Vocabulary size is smaller" in proc.stderr
    assert not out.exists()


# --- checkpoint globals ---------------------------------------------------------------------


def _save_as_numpy1(obj, path):
    """torch.save ``obj`` with numpy's internals named as numpy 1.x pickles name them
    (``numpy.core.multiarray.*``), whatever numpy is installed."""
    import pickle
    import types

    import numpy as np
    import torch

    core = getattr(np, "_core", None) or np.core
    renamed = {
        id(core.multiarray.scalar): b"scalar",
        id(core.multiarray._reconstruct): b"_reconstruct",
    }

    class Numpy1Pickler(pickle._Pickler):
        def save_global(self, obj, name=None):
            if id(obj) in renamed:
                self.write(pickle.GLOBAL + b"numpy.core.multiarray\n" + renamed[id(obj)] + b"\n")
                self.memoize(obj)
            else:
                super().save_global(obj, name)

        dispatch = dict(pickle._Pickler.dispatch)

    Numpy1Pickler.dispatch[types.BuiltinFunctionType] = Numpy1Pickler.save_global
    module = types.SimpleNamespace(Pickler=Numpy1Pickler, __name__="numpy1_pickle")
    torch.save(obj, path, pickle_module=module)


def test_numpy1_checkpoint_loads_and_crafted_pickle_is_refused(tmp_path):
    import argparse
    import pickle
    import zipfile

    import numpy as np
    import torch

    import truneg_fairseq  # noqa: F401  (installs the allow-list, as --user-dir does)

    ckpt = {
        "args": argparse.Namespace(lr=[0.1]),
        "model": {"w": torch.arange(3.0)},
        "extra_state": {"best": np.float64(0.25), "scores": np.arange(3), "n": np.int64(7)},
    }
    path = tmp_path / "numpy1.pt"
    _save_as_numpy1(ckpt, path)
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    assert b"numpy.core.multiarray\nscalar" in pkl and b"numpy._core" not in pkl
    state = torch.load(path, map_location="cpu")  # weights_only, as fairseq's resume calls it
    assert state["extra_state"]["best"] == 0.25 and state["extra_state"]["n"] == 7
    assert state["extra_state"]["scores"].tolist() == [0, 1, 2] and state["args"].lr == [0.1]

    class Evil:
        def __reduce__(self):
            return os.system, ("touch " + str(tmp_path / "pwned"),)

    class Sneaky:
        def __reduce__(self):
            return eval, ("1 + 1",)

    for payload in (Evil(), Sneaky()):
        bad = tmp_path / "bad.pt"
        torch.save({"model": {}, "extra_state": payload}, bad)
        with pytest.raises(pickle.UnpicklingError):
            torch.load(bad, map_location="cpu")
    assert not (tmp_path / "pwned").exists()


# --- WordNet provisioning -------------------------------------------------------------------


def _load_wordnet_in(env_extra, tmp_path):
    """load_wordnet() in a fresh process (nltk's search path and the loaded reader are global)."""
    import subprocess
    import sys

    code = "from truneg_fairseq.lexicon import load_wordnet; wn = load_wordnet(); print(wn.get_version())"
    env = {k: v for k, v in os.environ.items() if k not in ("NLTK_DATA", "WNHOME", "TRUNEG_CACHE")}
    env.update(TRUNEG_WORDNET_SYSTEM="0", HOME=str(tmp_path / "home"), **env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_wordnet_system_dirs_can_be_skipped_and_bad_wnhome_is_named(tmp_path):
    proc = _load_wordnet_in(
        {"WNHOME": str(tmp_path / "nowhere"), "TRUNEG_CACHE": str(tmp_path / "c")}, tmp_path
    )
    assert proc.returncode != 0 and "WordNet 3.0 not found" in proc.stderr
    assert "/usr/share/wordnet" not in proc.stderr.split("WordNet dict dirs")[1]  # skipped
    assert f"WNHOME={tmp_path / 'nowhere'} " in proc.stderr  # the variable and its directory named
    proc = _load_wordnet_in(
        {"WNHOME": "/usr/share/wordnet", "TRUNEG_CACHE": str(tmp_path / "c")}, tmp_path
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "3.0", proc.stderr


def test_wordnet_partial_cache_is_rebuilt_and_file_cache_is_named(tmp_path):
    cache = tmp_path / "cache"
    partial = cache / "nltk_data" / "corpora" / "wordnet"
    partial.mkdir(parents=True)
    (partial / "data.noun").write_text("truncated")
    proc = _load_wordnet_in({"WNHOME": "/usr/share/wordnet", "TRUNEG_CACHE": str(cache)}, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "3.0", proc.stderr
    assert "rebuilding the incomplete WordNet copy" in proc.stderr
    assert (partial / "data.noun").stat().st_size == os.stat("/usr/share/wordnet/data.noun").st_size
    assert not [p for p in partial.parent.iterdir() if p.name.startswith(".")]
    afile = tmp_path / "not_a_dir"
    afile.write_text("x")
    proc = _load_wordnet_in({"WNHOME": "/usr/share/wordnet", "TRUNEG_CACHE": str(afile)}, tmp_path)
    assert (
        proc.returncode != 0
        and f"TRUNEG_CACHE={afile}:" in proc.stderr
        and "not a directory" in proc.stderr
    )
    assert "NotADirectoryError" not in proc.stderr


# --- messages -------------------------------------------------------------------------------


def test_synonym_table_of_junk_gets_no_pickle_advice(tmp_path):
    import numpy as np

    from truneg_fairseq.lexicon.synonyms import SynonymTable, SynonymTableError

    junk = tmp_path / "table.npz"
    junk.write_text("primary main chief\n" * 20)
    objects = tmp_path / "objects.npz"
    np.savez(objects, pairs=np.array([{"a": 1}], dtype=object))
    for path, why in ((junk, "not an .npz archive"), (objects, "it holds pickled objects")):
        with pytest.raises(SynonymTableError) as e:
            SynonymTable.load(path)
        assert f"{path} is not a synonym table written by build_synonym_table.py ({why})" in str(
            e.value
        )
        assert "allow_pickle" not in str(e.value) and "pickle.load" not in str(e.value)


@pytest.mark.slow
def test_evaluate_mlm_names_truncated_checkpoint_and_other_dictionary(data_bin, tmp_path):
    from corpus_fixtures import make_corpus, tiny_corpus_lines
    from fairseq_runs import TINY_ROBERTA, fairseq_train

    fairseq_train(
        data_bin, tmp_path / "run", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    )
    ck = tmp_path / "run" / "checkpoint_last.pt"
    trunc = tmp_path / "truncated.pt"
    trunc.write_bytes(ck.read_bytes()[: ck.stat().st_size // 3])
    proc = run_script("evaluate_mlm.py", ["--data", str(data_bin), str(trunc)])
    assert proc.returncode == 2 and str(trunc) in proc.stderr and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr
    other = make_corpus(tmp_path / "other", tiny_corpus_lines(400, seed=5), vocab_size=120)
    proc = run_script("evaluate_mlm.py", ["--data", str(other), str(ck)])
    assert (
        proc.returncode == 2
        and f"--data {other}: its dict.txt is not the dictionary {ck} was trained with"
        in proc.stderr
    ), proc.stderr[-2000:]
    assert "Leave --data out" in proc.stderr and "size mismatch" not in proc.stderr
    assert "Traceback" not in proc.stderr
