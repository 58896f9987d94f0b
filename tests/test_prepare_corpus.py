"""The corpus pipeline as a library (CorpusConfig, prepare_corpus) at scale: the same bytes with
1 and 2 workers and from the fast binarizer as from fairseq-preprocess, progress lines in
fairseq's log format, no process left behind by a SIGKILL or SIGTERM, and the <unk> warning
telling a cased text from a vocabulary mismatch; the <unk> rate logged by prepare_corpus.py and
by SQuAD's windows; prepare_corpus.py on binary or non-UTF-8 input (one error naming the line,
nothing written), on gzip input, and failing part way (nothing left); several plain and
compressed inputs giving the very files the in-memory pipeline wrote, and the intermediates
(raw/, tok/) removed unless --keep-intermediates."""

import bz2
import gzip
import hashlib
import logging
import lzma
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import wordpiece_vocab
from repo_paths import REPO

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.pipelines.children import descendants
from truneg_fairseq.pipelines.corpus import CorpusConfig, prepare_corpus
from truneg_fairseq.pipelines.corpus_parallel import cut
from truneg_fairseq.text import TokenizerSpec

LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| INFO \| truneg_fairseq\.prepare_corpus \| "
)


def _text(path: Path, n: int, seed: int = 0) -> Path:
    path.write_text("\n".join(tiny_corpus_lines(n, seed)) + "\n")
    return path


def _files(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("preprocess.log", ".truneg-output.json")
    }


def test_one_and_two_workers_write_the_same_bytes(tmp_path, corpus_dir):
    src = _text(tmp_path / "corpus.txt", 8000)
    outs = {}
    for workers in (1, 2):
        cfg = CorpusConfig(
            output_dir=str(tmp_path / f"w{workers}"),
            inputs=[str(src)],
            tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model")),
            workers=workers,
            keep_intermediates=True,
        )
        prepare_corpus(cfg)
        outs[workers] = _files(tmp_path / f"w{workers}")
    assert len(cut(tmp_path / "w2" / "tok" / "train.txt", 2)) == 2  # two jobs really ran
    assert {"raw/train.txt", "tok/train.txt", "data-bin/train.bin", "data-bin/train.idx"} <= set(
        outs[1]
    )
    assert outs[1] == outs[2]


def test_fast_binarizer_writes_what_fairseq_preprocess_writes(tmp_path):
    """Whitespace words cut to 40 entries: many <unk>, the same replaced share in both logs."""
    src = _text(tmp_path / "corpus.txt", 3000, seed=3)
    logs = {}
    for binarizer in ("fast", "fairseq-preprocess"):
        out = tmp_path / binarizer
        proc = run_script(
            "prepare_corpus.py",
            ["--input", str(src), "--output-dir", str(out), "--tokenizer", "whitespace"]
            + ["--vocab-size", "40", "--workers", "2", "--binarizer", binarizer],
        )
        assert proc.returncode == 0, proc.stderr
        logs[binarizer] = re.findall(r"/tok/\w+\.txt: \d+ sents, .*% replaced", proc.stdout)
    fast, fairseq = (
        _files(tmp_path / "fast" / "data-bin"),
        _files(tmp_path / "fairseq-preprocess" / "data-bin"),
    )
    assert set(fast) >= {"dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx"}
    assert fast == fairseq
    assert len(logs["fast"]) == 2 and logs["fast"] == logs["fairseq-preprocess"]
    assert float(re.search(r"([0-9.]+)% replaced", logs["fast"][0]).group(1)) > 1


def test_progress_lines_of_every_stage_in_fairseq_format(tmp_path, corpus_dir):
    src = _text(tmp_path / "corpus.txt", 2000)
    proc = run_script(
        "prepare_corpus.py",
        ["--input", str(src), "--output-dir", str(tmp_path / "out"), "--vocab-size", "120"]
        + ["--workers", "2", "--progress-every", "0.05"],
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for pattern in (
        r"read: [\d,]+ lines$",
        r"split: wrote [\d,]+ of [\d,]+ distinct lines$",
        r"split: \d+ train, \d+ valid lines \(duplicates removed: \d+\)$",
        r"train sentencepiece: \d+ s$",
        r"encode train: [\d,]+ lines read, [\d,]+ pieces written$",
        r"binarize train: [\d,]+ of [\d,]+ lines \(\d+%\), [\d,]+ tokens$",
        r"binarize: done in [0-9.]+ s$",
    ):
        hits = [x for x in lines if re.search(LOG_LINE.pattern + pattern, x)]
        assert hits, (pattern, proc.stdout)
    # the <unk> share of each split, named by its final path (no "[None]" language tag)
    replaced = [x for x in lines if "replaced (by <unk>)" in x]
    assert len(replaced) == 2 and "[None]" not in proc.stdout, replaced
    assert all(f"{tmp_path / 'out' / 'tok'}/" in x for x in replaced), replaced
    final = [x for x in lines if "encode train:" in x][-1]
    n_train = int(re.search(r"split: (\d+) train", proc.stdout).group(1))
    assert f"encode train: {n_train:,} lines read" in final


def test_config_errors_name_the_flag(tmp_path):
    cfg = CorpusConfig(output_dir=str(tmp_path / "o"), inputs=["x.txt"], dict=str(tmp_path / "d"))
    with pytest.raises(CorpusError, match="--dict .* not found"):
        prepare_corpus(cfg)
    with pytest.raises(CorpusError, match="--workers 0"):
        prepare_corpus(CorpusConfig(output_dir=str(tmp_path / "o"), inputs=["x"], workers=0))
    proc = run_script("prepare_corpus.py", ["--input", "x", "--output-dir", "o", "--workers", "0"])
    assert proc.returncode == 2 and "--workers" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_file_of_the_users_where_it_would_write_is_refused_before_any_work(tmp_path):
    """A dict.txt of the user's in DIR/data-bin: one error before the corpus is even read (no
    stage starts), the file untouched."""
    from truneg_fairseq.outputs import OutputDirError

    out = tmp_path / "out"
    (out / "data-bin").mkdir(parents=True)
    (out / "data-bin" / "dict.txt").write_text("mine 1\n")
    stages = []
    cfg = CorpusConfig(
        output_dir=str(out),
        inputs=[str(_text(tmp_path / "c.txt", 50))],
        tokenizer=TokenizerSpec("whitespace"),
    )
    with pytest.raises(OutputDirError, match=r"data-bin/dict.txt was not written by"):
        prepare_corpus(cfg, on_stage=lambda name, when: stages.append(name))
    assert stages == []
    assert (out / "data-bin" / "dict.txt").read_text() == "mine 1\n"


@pytest.mark.parametrize("binarizer", ["fast", "fairseq-preprocess"])
def test_cr_only_lines_and_a_comma_in_the_output_dir(tmp_path, binarizer):
    """A text whose lines end in a lone CR is read line by line, and an output directory with a
    comma (which fairseq-preprocess would split into two paths) binarizes: the same data-bin as
    the plain text into a plain directory."""
    lines = tiny_corpus_lines(1500, seed=4)
    plain, cr = tmp_path / "plain.txt", tmp_path / "cr.txt"
    plain.write_text("\n".join(lines) + "\n")
    cr.write_bytes(("\r".join(lines) + "\r").encode())
    outs = {}
    for name, src, out in (("plain", plain, "plain"), ("cr", cr, "runs,v2")):
        cfg = CorpusConfig(
            output_dir=str(tmp_path / out),
            inputs=[str(src)],
            tokenizer=TokenizerSpec("whitespace"),
            vocab_size=200,
            workers=1,
            binarizer=binarizer,
        )
        prepare_corpus(cfg)
        outs[name] = _files(tmp_path / out / "data-bin")
    assert {"train.bin", "valid.bin", "dict.txt"} <= set(outs["cr"])
    assert outs["cr"] == outs["plain"]


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
            "--keep-intermediates",
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


def _mixed_inputs(root: Path) -> list:
    """A plain text (a byte-order mark, CRLF and tab-separated lines, blank lines between) and
    gzip, bzip2 and xz ones (one named without its suffix), with lines repeated across them."""
    root.mkdir(parents=True, exist_ok=True)
    a = tiny_corpus_lines(1200, seed=21)
    b = tiny_corpus_lines(900, seed=22) + a[:100]
    c = tiny_corpus_lines(700, seed=23)
    d = tiny_corpus_lines(500, seed=24) + b[-50:]
    text_a = "\ufeff" + "".join(
        ("  " + x.replace(" ", "\t", 1) + " \r\n")
        if i % 7 == 0
        else (x + "\n") + ("\n" if i % 11 == 0 else "")
        for i, x in enumerate(a)
    )
    (root / "a.txt").write_text(text_a, encoding="utf-8")
    with gzip.open(root / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(b) + "\n")
    with bz2.open(root / "c.txt.bz2", "wt", encoding="utf-8") as f:
        f.write("\n".join(c))
    with lzma.open(root / "d.xz", "wt", encoding="utf-8") as f:
        f.write("\n".join(d) + "\n\n")
    return [str(root / n) for n in ("a.txt", "b.txt.gz", "c.txt.bz2", "d.xz")]


def _digests(root: Path) -> dict:
    """sha256[:16] of every output but the logs, the marker, the tokenizer record (absolute
    paths) and spm.model (sentencepiece stores a varying field in it; spm.vocab is its
    content)."""
    skip = ("preprocess.log", ".truneg-output.json", "tokenizer_fingerprint.json", "spm.model")
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip
    }


# the files of _mixed_inputs as the pipeline wrote them when it held the corpus in memory
EARLIER_OUTPUTS = {
    "whitespace": {
        "data-bin/dict.txt": "7d834a8802cf0a89",
        "data-bin/train.bin": "9fa219ce321047fc",
        "data-bin/train.idx": "73daea2a04fce1b0",
        "data-bin/valid.bin": "423b2bcf1097243e",
        "data-bin/valid.idx": "6d5506a4c5206463",
        "raw/train.txt": "6dfd0e9308b0336e",
        "raw/valid.txt": "a1973b16ccb20f29",
        "tok/train.txt": "6dfd0e9308b0336e",
        "tok/valid.txt": "a1973b16ccb20f29",
    },
    "sentencepiece": {
        "data-bin/dict.txt": "9a9cea74a0fee5ca",
        "data-bin/train.bin": "939c97e5535d67d8",
        "data-bin/train.idx": "c29b0e891e1b653b",
        "data-bin/valid.bin": "901f7d7b873e2627",
        "data-bin/valid.idx": "54fce5837699d412",
        "raw/train.txt": "c99cebc9dd9e166f",
        "raw/valid.txt": "8fdc1e4d487513f4",
        "spm.vocab": "89df11f8bcc57cd6",
        "tok/train.txt": "b2339dd44dbeff1b",
        "tok/valid.txt": "d8149e5eeb72cfa4",
    },
}
MIXED_SETTINGS = {
    "whitespace": dict(
        tokenizer=TokenizerSpec("whitespace"),
        vocab_size=300,
        workers=1,
        valid_fraction=0.05,
        seed=3,
    ),
    # sentencepiece trained on the text, and --max-lines stopping the reading in the third file
    "sentencepiece": dict(vocab_size=150, workers=2, max_lines=2500),
}


@pytest.mark.parametrize("setting", sorted(MIXED_SETTINGS))
def test_plain_and_compressed_files_give_the_outputs_written_before(tmp_path, caplog, setting):
    """Four inputs (plain, .gz, .bz2, .xz without its suffix): the same raw/, tok/ and data-bin
    files, byte for byte, as when the corpus was held in memory, and the same counts in the
    log; without --keep-intermediates the same data-bin and spm.*, and no raw/ or tok/."""
    inputs = _mixed_inputs(tmp_path / "in")
    caplog.set_level(logging.INFO)
    kept = tmp_path / "kept"
    prepare_corpus(
        CorpusConfig(str(kept), inputs, keep_intermediates=True, **MIXED_SETTINGS[setting])
    )
    assert _digests(kept) == EARLIER_OUTPUTS[setting]
    read, split = {
        "whitespace": (
            "read 3450 non-empty lines from 4 file(s) (95 empty lines skipped)",
            "split: 2002 train, 105 valid lines (duplicates removed: 1343)",
        ),
        "sentencepiece": (
            "read 2500 non-empty lines from 4 file(s) (94 empty lines skipped; "
            "stopped at --max-lines 2500, the rest not read)",
            "split: 1577 train, 32 valid lines (duplicates removed: 891)",
        ),
    }[setting]
    assert read in caplog.text and split in caplog.text
    default = tmp_path / "default"
    prepare_corpus(CorpusConfig(str(default), inputs, **MIXED_SETTINGS[setting]))
    want = {k: v for k, v in EARLIER_OUTPUTS[setting].items() if not k.startswith(("raw", "tok"))}
    assert _digests(default) == want
    assert not (default / "raw").exists() and not (default / "tok").exists()
    assert "removed the intermediates raw/ and tok/" in caplog.text


def test_intermediates_go_unless_kept_and_a_kept_set_goes_with_the_next_run(tmp_path):
    """The command line: by default the output is spm.* and data-bin/ only, less than 1.5x the
    text; --keep-intermediates keeps raw/ and tok/ (the same data-bin); a later run without it
    removes the raw/ and tok/ the earlier one kept, and nothing else."""
    text = _text(tmp_path / "corpus.txt", 3000, seed=6)
    out = tmp_path / "out"
    args = ["--input", str(text), "--output-dir", str(out), "--tokenizer", "whitespace"]
    proc = run_script("prepare_corpus.py", args)
    assert proc.returncode == 0, proc.stderr
    assert "removed the intermediates raw/ and tok/" in proc.stdout
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["data-bin"]
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 1.5 * text.stat().st_size, (size, text.stat().st_size)
    data_bin = _files(out / "data-bin")
    proc = run_script("prepare_corpus.py", [*args, "--keep-intermediates"])
    assert proc.returncode == 0, proc.stderr
    assert {"raw/train.txt", "raw/valid.txt", "tok/train.txt", "tok/valid.txt"} <= set(_files(out))
    assert _files(out / "data-bin") == data_bin
    (out / "raw" / "notes.txt").write_text("mine")  # the user's, beside the outputs
    proc = run_script("prepare_corpus.py", args)
    assert proc.returncode == 0, proc.stderr
    left = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert left == {f"data-bin/{f}" for f in data_bin} | {
        ".truneg-output.json",
        "data-bin/preprocess.log",
        "raw/notes.txt",
    }


def _start(tmp_path: Path, n_lines: int, binarizer: str = "fast"):
    """prepare_corpus.py as a process on ``n_lines`` of whitespace text, 2 workers."""
    src = _text(tmp_path / "corpus.txt", n_lines, seed=5)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "prepare_corpus.py"), "--input", str(src)]
        + ["--output-dir", str(tmp_path / "out"), "--tokenizer", "whitespace", "--workers", "2"]
        + ["--progress-every", "0.05", "--binarizer", binarizer],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _kill_in_binarize(proc, sig):
    """Wait for the binarize stage's progress line; send ``sig`` while its workers run; return
    the descendants seen then."""
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if re.search(r"\| binarize (train|\(fairseq-preprocess\)): ", line):
            kids = descendants(proc.pid)
            if kids:
                proc.send_signal(sig)
                return kids, seen
    pytest.fail("the binarize stage ended before its workers were seen:\n" + "".join(seen))


def _gone(pids, timeout=10.0) -> list:
    """The pids still running (not zombies) after ``timeout``."""
    deadline = time.time() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(pid)
            except OSError:
                pass
        if not alive or time.time() > deadline:
            return alive
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
@pytest.mark.parametrize("binarizer", ["fast", "fairseq-preprocess"])
def test_sigkill_during_binarize_leaves_no_process(tmp_path, binarizer):
    proc = _start(tmp_path, 60_000, binarizer)
    kids, _ = _kill_in_binarize(proc, signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert _gone(kids) == []
    assert not (tmp_path / "out" / "data-bin").exists()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
def test_sigterm_during_binarize_ends_the_workers_and_cleans_up(tmp_path):
    proc = _start(tmp_path, 60_000)
    kids, _ = _kill_in_binarize(proc, signal.SIGTERM)
    proc.wait(30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert _gone(kids, timeout=2.0) == []
    out = tmp_path / "out"
    assert not out.exists() or not any(
        p.name.startswith(".prepare_corpus.py.new") for p in out.iterdir()
    )


# ---- the <unk> warning: casing or vocabulary ---------------------------------------------------


def test_unknown_warning_says_casing_for_a_cased_text(tmp_path, corpus_dir, caplog):
    """The sentencepiece model and dict.txt of the lower-case tiny corpus have no upper-case
    pieces: an upper-case text is mostly <unk>, and lower-cased it is not."""
    src = tmp_path / "cased.txt"
    src.write_text("\n".join(x.upper() for x in tiny_corpus_lines(600, seed=7)) + "\n")
    caplog.set_level(logging.INFO)
    prepare_corpus(
        CorpusConfig(
            output_dir=str(tmp_path / "out"),
            inputs=[str(src)],
            tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model")),
            dict=str(corpus_dir / "data-bin" / "dict.txt"),
            workers=1,
        )
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "are <unk>" in w and "the text is cased and the vocabulary is not" in w for w in warnings
    )
    assert not any("does not match the tokenizer's vocabulary" in w for w in warnings)


def test_unknown_warning_says_vocabulary_mismatch_for_another_dictionary(
    tmp_path, corpus_dir, caplog
):
    """A dict.txt of whitespace words given with the sentencepiece tokenizer: the pieces are not
    in it, whatever the casing."""
    from fairseq.data import Dictionary

    src = _text(tmp_path / "corpus.txt", 600, seed=8)
    words = Dictionary()
    for line in tiny_corpus_lines(600, seed=8):
        for w in line.split():
            words.add_symbol(w)
    words.finalize()
    words.save(str(tmp_path / "words.dict.txt"))
    caplog.set_level(logging.INFO)
    prepare_corpus(
        CorpusConfig(
            output_dir=str(tmp_path / "out"),
            inputs=[str(src)],
            tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model")),
            dict=str(tmp_path / "words.dict.txt"),
            workers=1,
        )
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("does not match the tokenizer's vocabulary" in w for w in warnings), warnings
    assert not any("cased" in w for w in warnings)


def test_squad_unknown_warning_tells_casing_from_a_vocabulary_mismatch(corpus_dir, caplog):
    """--task squad's twin: the same causes, measured on the questions and contexts."""
    from fairseq.data import Dictionary

    from truneg_fairseq.data.squad_windows import Feature
    from truneg_fairseq.tasks.squad import _report_unknown
    from truneg_fairseq.text import build_tokenizer

    d = Dictionary.load(str(corpus_dir / "data-bin" / "dict.txt"))
    tok = build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model")))
    features = [Feature(0, [0, 5, 3, 2, 7, 3, 2], 4, [])]
    texts = tiny_corpus_lines(200, seed=9)
    caplog.set_level(logging.INFO)
    _report_unknown(features, d.unk(), "dev.json", d, tok, [t.upper() for t in texts])
    assert "dev.json: 2 of 7 tokens" in caplog.text and "the text is cased" in caplog.text
    caplog.clear()
    words = Dictionary()
    for t in texts:
        for w in t.split():
            words.add_symbol(w)
    _report_unknown(features, words.unk(), "dev.json", words, tok, texts)
    assert "does not match the tokenizer's vocabulary" in caplog.text
    assert "cased" not in caplog.text


@pytest.mark.parametrize("lowercase,warned", [("no", True), ("yes", False)])
def test_unknown_token_rate_is_logged_and_a_high_one_is_a_warning(tmp_path, lowercase, warned):
    """An uncased vocabulary with --lowercase no turns every capitalised word into <unk>."""
    from corpus_fixtures import tiny_corpus_lines

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in wordpiece_vocab()))
    text = tmp_path / "text.txt"
    text.write_text("".join(line.capitalize() + "\n" for line in tiny_corpus_lines(300)))
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(text),
            "--output-dir",
            str(tmp_path / "work"),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(vocab),
            "--lowercase",
            lowercase,
        ],
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert re.search(r"data-bin/train: \d+ of \d+ tokens \([\d.]+%\) are <unk>", out)
    assert ("WARNING" in out and "check --lowercase" in out) == warned


def test_squad_windows_report_their_unknown_rate(caplog):
    import logging

    from truneg_fairseq.data.squad_windows import Feature
    from truneg_fairseq.tasks.squad import _report_unknown

    features = [Feature(0, [0, 5, 3, 2, 7, 3, 2], 4, []), Feature(1, [0, 5, 2, 7, 8, 9, 2], 3, [])]
    with caplog.at_level(logging.INFO):
        assert _report_unknown(features, 3, "dev.json") == pytest.approx(100 * 2 / 14)
    assert "dev.json: 2 of 14 tokens (14.3%) are <unk>: the tokenizer does not fit" in caplog.text


def test_command_line_builds_the_same_config(tmp_path):
    """What the study records in commands.sh (truneg-prepare-corpus ...) parses back to its config."""
    from truneg_fairseq.cli.prepare_corpus import config_from_args, get_parser
    from truneg_fairseq.pipelines.corpus import command_line

    for cfg in (
        CorpusConfig(
            output_dir="w",
            inputs=["a.txt", "b.txt"],
            tokenizer=TokenizerSpec("whitespace"),
            vocab_size=16000,
            valid_fraction=0.05,
            seed=3,
        ),
        CorpusConfig(
            output_dir="w",
            wordnet_glosses=True,
            wordnet_headwords=True,
            workers=2,
            tokenizer=TokenizerSpec("wordpiece", vocab="v.txt", lowercase=True),
            dict="d.txt",
            spm_sample_lines=1000,
            binarizer="fairseq-preprocess",
        ),
    ):
        cmd = command_line(cfg)
        assert cmd[0] == "truneg-prepare-corpus"
        assert config_from_args(get_parser().parse_args(cmd[1:])) == cfg
