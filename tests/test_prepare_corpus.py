"""The corpus pipeline as a library (CorpusConfig, prepare_corpus) at scale: the same bytes with
1 and 2 workers and from the fast binarizer as from fairseq-preprocess, progress lines in
fairseq's log format, no process left behind by a SIGKILL or SIGTERM, and the <unk> warning
telling a cased text from a vocabulary mismatch; the <unk> rate logged by prepare_corpus.py and
by SQuAD's windows; prepare_corpus.py on binary or non-UTF-8 input (one error naming the line,
nothing written), on gzip input, and failing part way (nothing left)."""

import logging
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
    n_train = len((tmp_path / "out" / "raw" / "train.txt").read_text().splitlines())
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
