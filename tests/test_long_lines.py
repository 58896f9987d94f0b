"""Long lines: the text readers take time in proportion to the file however long a line is (a
20 MB line is read at once, whole), and a line longer than the limit (TRUNEG_MAX_LINE_BYTES,
default 32 MiB) is one error naming the file and the line, in the reader and in the commands
that read text (truneg-hf-train --train, truneg-evaluate --text, truneg-prepare-corpus)."""

import io

import pytest
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import save_bert, wordpiece_vocab

from truneg_fairseq.errors import CorpusError, LineTooLongError
from truneg_fairseq.text import binary_lines, read_lines


class CountingReader(io.BytesIO):
    """A binary file that counts the bytes its reads return."""

    handed = 0

    def read(self, n=-1):
        out = super().read(n)
        self.handed += len(out)
        return out


def test_a_20_mb_line_is_read_whole_and_every_byte_once(tmp_path, monkeypatch):
    from truneg_fairseq.text import lines as lines_module

    big = b"word " * (4 << 20)  # 20 MiB
    path = tmp_path / "long.txt"
    path.write_bytes(b"first\r\n" + big + b"\r\nlast")
    lines = list(read_lines(path))
    assert [len(x) for x in lines] == [5, len(big), 4]
    assert lines[1] == big.decode()
    # the same in blocks of 4 KiB (5,120 blocks for the line: a reader that copied the line so
    # far at each block would copy some 50 GB), through a file that counts what it hands out
    monkeypatch.setattr(lines_module, "BLOCK", 4096)
    f = CountingReader(b"a\n" + big + b"\nb\n")
    assert [len(x) for x in binary_lines(f)] == [1, len(big), 1]
    assert f.handed == len(big) + 5
    # CR-only line endings, the long line spanning many blocks
    assert [len(x) for x in binary_lines(io.BytesIO(b"a\r" + big + b"\rb"))] == [1, len(big), 1]


def test_a_line_over_the_limit_is_one_error_naming_file_and_line(tmp_path, monkeypatch):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"one\ntwo\n" + b"x" * 3_000_000 + b"\nfour\n")
    with pytest.raises(LineTooLongError, match=r"corpus\.txt, line 3 is longer than 2,000,000"):
        list(read_lines(path, limit=2_000_000))
    monkeypatch.setenv("TRUNEG_MAX_LINE_BYTES", "1000")
    with pytest.raises(LineTooLongError, match=r"line 3 is longer than 1,000 bytes"):
        list(read_lines(path))
    # the error comes as soon as the line passes the limit, not after reading all of it
    f = CountingReader(b"x" * (8 << 20) + b"\n")
    with pytest.raises(LineTooLongError, match="line 1 "):
        list(binary_lines(f, limit=1 << 20, name="f"))
    assert f.handed <= 3 << 20
    monkeypatch.setenv("TRUNEG_MAX_LINE_BYTES", "many")
    with pytest.raises(CorpusError, match="TRUNEG_MAX_LINE_BYTES='many'"):
        list(read_lines(path))


def _long_text(path, n_short=20):
    lines = tiny_corpus_lines(n_short)
    lines.insert(5, " ".join(["house"] * 400_000))  # 2.4 MB
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny BERT directory and its import (model.pt, dict.txt, vocab.txt)."""
    from truneg_fairseq.convert.hf import import_hf

    root = tmp_path_factory.mktemp("long_lines")
    save_bert(root / "bert", vocab=wordpiece_vocab())
    return root / "bert", import_hf(root / "bert", root / "imported")


def test_hf_train_says_an_over_long_line_in_one_line(bert, tmp_path, monkeypatch, capsys):
    from truneg_fairseq.cli import hf_train

    text = _long_text(tmp_path / "train.txt")
    monkeypatch.setenv("TRUNEG_MAX_LINE_BYTES", str(1 << 20))
    argv = [str(bert[0]), "--train", str(text), "--output-dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as e:
        hf_train.main(
            [*argv, "--cpu", "--report-to", "none", "--max-steps", "1", "--seq-len", "32"]
        )
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    assert f"{text}, line 6 is longer than 1,048,576 bytes" in err.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["evaluate_mlm", "prepare_corpus"])
def test_text_commands_say_an_over_long_line_in_one_line(
    bert, tmp_path, corpus_dir, command, monkeypatch
):
    text = _long_text(tmp_path / "text.txt")
    if command == "evaluate_mlm":
        args = ["--text", text, "--device", "cpu", bert[1]]
    else:
        args = ["--input", text, "--output-dir", tmp_path / "out"]
        args += ["--spm-model", corpus_dir / "spm.model"]
    monkeypatch.setenv("TRUNEG_MAX_LINE_BYTES", str(1 << 20))
    proc = run_script(f"{command}.py", [str(a) for a in args])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert f"{text}, line 6 is longer than 1,048,576 bytes" in last, proc.stderr[-3000:]
