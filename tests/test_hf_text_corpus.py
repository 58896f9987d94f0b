"""The text of truneg-hf-train as memory-mapped Arrow (real datasets, real tokenizers): tokenized
once into the cache and read back without tokenizing by a resumed run and by every torchrun
process; compressed, several and saved inputs read as one text; --streaming resumed exactly."""

import bz2
import gzip
import json
import lzma
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import tiny_bert_and_texts
from repo_paths import REPO

from truneg_fairseq.cli import hf_train
from truneg_fairseq.errors import HFTrainError


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A BERT masked-LM directory (no dropout) and texts/{a,b}.txt (100 lines, one empty)."""
    return tiny_bert_and_texts(tmp_path_factory.mktemp("hf_text"))


@pytest.fixture(scope="module")
def tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny / "bert"), local_files_only=True)


@pytest.fixture(scope="module")
def table(tok, tmp_path_factory):
    """The tokenizer's synonym table, built once for the module's runs."""
    from truneg_fairseq.hf import build_synonym_table

    path = tmp_path_factory.mktemp("table") / "synonyms.npz"
    build_synonym_table(tok)[0].save(path)
    return path


def expected_rows(tok, lines, seq_len=32):
    """What the command trained on before the text went to Arrow: every non-empty line,
    stripped, tokenized in one list."""
    from truneg_fairseq.hf import tokenize_lines

    return tokenize_lines(tok, [x.strip() for x in lines if x.strip()], seq_len)


def rows_of(data):
    return [data[i]["input_ids"].tolist() for i in range(len(data))]


def entry_files(entry):
    """(name, inode, mtime_ns) of every file of a cache entry: a rebuild changes them."""
    return sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in entry.iterdir())


def counting_tokenizer(tiny):
    """The model's tokenizer, counting the calls that tokenize."""
    from transformers import AutoTokenizer

    base = type(AutoTokenizer.from_pretrained(str(tiny / "bert")))

    class Counting(base):
        calls = 0

        def __call__(self, *args, **kwargs):
            type(self).calls += 1
            return super().__call__(*args, **kwargs)

    return Counting.from_pretrained(str(tiny / "bert"))


def test_the_text_is_tokenized_once_and_read_back_memory_mapped(tiny, tok, tmp_path, caplog):
    from truneg_fairseq.hf.text_corpus import tokenized_text

    caplog.set_level("INFO")
    counting = counting_tokenizer(tiny)
    cache = tmp_path / "cache"
    first = tokenized_text(tiny / "texts", "--train", counting, 32, cache_dir=cache, workers=1)
    calls = type(counting).calls
    assert first.built and calls >= 1
    lines = [*(tiny / "texts" / "a.txt").read_text().splitlines()]
    lines += (tiny / "texts" / "b.txt").read_text().splitlines()
    assert rows_of(first) == expected_rows(tok, lines) and len(first) == 100
    assert [first[i]["index"] for i in (0, 99)] == [0, 99]
    assert (
        "100 examples (one per non-empty line; 1 empty lines left out, 0 lines cut" in caplog.text
    )
    # Trainer gets Arrow memory-mapped from the cache entry, not Python lists
    files = [c["filename"] for c in first.data.cache_files]
    assert files and all(f.startswith(str(first.cache) + os.sep) for f in files)
    before = entry_files(first.cache)

    caplog.clear()
    again = tokenized_text(tiny / "texts", "--train", counting, 32, cache_dir=cache, workers=1)
    assert type(counting).calls == calls and not again.built  # not one call more
    assert again.cache == first.cache and entry_files(again.cache) == before
    assert rows_of(again) == rows_of(first)
    assert f"read from the cache {first.cache}" in caplog.text

    # what changes the ids is in the key: another --seq-len, a file changed since
    short = tokenized_text(tiny / "texts", "--train", counting, 8, cache_dir=cache, workers=1)
    assert short.built and short.cache != first.cache and max(map(len, rows_of(short))) == 8
    text = tmp_path / "t.txt"
    text.write_text("the main road .\n")
    one = tokenized_text(text, "--train", counting, 32, cache_dir=cache, workers=1)
    text.write_text("the chief road .\n")
    os.utime(text, ns=(1, 1))
    other = tokenized_text(text, "--train", counting, 32, cache_dir=cache, workers=1)
    assert other.built and other.cache != one.cache
    assert rows_of(other) == expected_rows(tok, ["the chief road ."])


def test_compressed_several_and_saved_inputs_read_as_one_text(tiny, tok, tmp_path, monkeypatch):
    from datasets import Dataset, DatasetDict

    from truneg_fairseq.hf import text_corpus
    from truneg_fairseq.hf.text_corpus import tokenized_text

    # two processes read the files and two tokenize, as for a large corpus: the lines keep
    # their order
    monkeypatch.setattr(text_corpus, "BYTES_PER_READER", 1)
    monkeypatch.setattr(text_corpus, "ROWS_PER_WORKER", 10)

    lines = tiny_corpus_lines(40, seed=11)
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt.gz").write_bytes(gzip.compress("\n".join(lines[:10]).encode()))
    (folder / "b.txt.bz2").write_bytes(bz2.compress(("\n".join(lines[10:20]) + "\n\n").encode()))
    (folder / "c.txt.xz").write_bytes(lzma.compress("\r\n".join(lines[20:30]).encode()))
    plain = tmp_path / "d.txt"  # its name says nothing; its first bytes say gzip
    plain.write_bytes(gzip.compress("\n".join(lines[30:]).encode()))
    cache = tmp_path / "cache"
    data = tokenized_text([folder, plain], "--train", tok, 32, cache_dir=cache, workers=2)
    assert rows_of(data) == expected_rows(tok, lines)
    assert len(data.data.cache_files) == 2  # a file from each tokenizing process

    # a dataset written by save_to_disk: its "text" tokenized through the cache, alike
    Dataset.from_dict({"text": lines + ["  "]}).save_to_disk(str(tmp_path / "saved"))
    saved = tokenized_text(tmp_path / "saved", "--train", tok, 32, cache_dir=cache)
    assert saved.built and rows_of(saved) == rows_of(data)
    again = tokenized_text(tmp_path / "saved", "--train", tok, 32, cache_dir=cache)
    assert not again.built and again.cache == saved.cache
    # one already tokenized is read as it is; a Dataset object given to the API as well
    ids = expected_rows(tok, lines)
    Dataset.from_dict({"input_ids": ids}).save_to_disk(str(tmp_path / "ids"))
    assert rows_of(tokenized_text(tmp_path / "ids", "--train", tok, 32, cache_dir=cache)) == ids
    given = tokenized_text(Dataset.from_dict({"text": lines}), "--train", tok, 32)
    assert rows_of(given) == ids

    with pytest.raises(HFTrainError, match="rows of up to 1[0-9] tokens, more than --seq-len 8"):
        tokenized_text(tmp_path / "ids", "--train", tok, 8, cache_dir=cache)
    DatasetDict({"train": Dataset.from_dict({"text": lines})}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(HFTrainError, match=r"holds a DatasetDict \(splits train\).*dd/train"):
        tokenized_text(tmp_path / "dd", "--train", tok, 32, cache_dir=cache)
    bad = tmp_path / "bad.txt.xz"
    bad.write_bytes(lzma.compress(b"the main road .\n\xff\n"))
    with pytest.raises(HFTrainError, match=f"--train: {bad} line 2 is not UTF-8 text"):
        tokenized_text([plain, bad], "--train", tok, 32, cache_dir=cache, workers=2)
    (tmp_path / "empty").mkdir()
    with pytest.raises(HFTrainError, match="is a folder without text files"):
        tokenized_text(tmp_path / "empty", "--train", tok, 32, cache_dir=cache)


@pytest.mark.slow
def test_every_torchrun_process_maps_the_one_cache(tiny, tmp_path):
    """Two processes started together on one uncached text: one tokenizes (the other waits on
    the entry's lock), both memory-map the same files."""
    script = tmp_path / "load.py"
    script.write_text(
        "import json, os, sys\n"
        "from transformers import AutoTokenizer\n"
        "from truneg_fairseq.hf.text_corpus import tokenized_text\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "rows = tokenized_text(sys.argv[2], '--train', tok, 32, cache_dir=sys.argv[3], workers=1)\n"
        "files = [c['filename'] for c in rows.data.cache_files]\n"
        "print(json.dumps({'rank': os.environ['RANK'], 'built': rows.built, 'files': files}))\n"
    )
    text = tmp_path / "t.txt"
    text.write_text("\n".join(tiny_corpus_lines(1500, seed=5)) + "\n")
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONPATH=f"{REPO}{os.pathsep}" + os.environ.get("PYTHONPATH", ""),
    )
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), str(tiny / "bert"), str(text), str(tmp_path / "cache")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    seen = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    assert sorted(s["rank"] for s in seen) == ["0", "1"], run.stdout
    assert sum(s["built"] for s in seen) == 1, seen  # tokenized once in all
    assert seen[0]["files"] == seen[1]["files"] and seen[0]["files"]


def run_args(tiny, table, out, cache, *extra):
    return [
        str(tiny / "bert"), "--output-dir", str(out), "--cpu", "--batch-size", "4",
        "--seq-len", "32", "--lr", "1e-3", "--report-to", "none", "--save-steps", "2",
        "--log-steps", "1", "--cache-dir", str(cache), "--synonym-table", str(table), *extra,
    ]  # fmt: skip


def test_a_resumed_run_reads_the_cache_and_tokenizes_nothing(tiny, table, tmp_path, capsys):
    """The command on two files, one compressed: the first run tokenizes into --cache-dir, the
    resumed one logs that it read the cache, whose files are the ones written before."""
    text = tmp_path / "b.txt.gz"
    text.write_bytes(gzip.compress((tiny / "texts" / "b.txt").read_bytes()))
    train = ["--train", str(tiny / "texts" / "a.txt"), str(text)]
    cache = tmp_path / "cache"
    assert (
        hf_train.main(run_args(tiny, table, tmp_path / "run", cache, *train, "--max-steps", "2"))
        == 0
    )
    log = capsys.readouterr().out
    assert "100 examples (one per non-empty line; 1 empty lines left out" in log
    assert "tokenized in" in log
    (entry,) = [p for p in (cache / "truneg-hf-tokens").iterdir() if p.is_dir()]
    before = entry_files(entry)
    assert (
        hf_train.main(run_args(tiny, table, tmp_path / "run", cache, *train, "--max-steps", "3"))
        == 0
    )
    log = capsys.readouterr().out
    assert "resuming from" in log and "num_updates 3" in log
    assert f"read from the cache {entry}" in log and "tokenized in" not in log
    assert entry_files(entry) == before


def test_a_line_that_is_not_utf8_is_one_error_naming_the_file_and_line(
    tiny, table, tmp_path, capsys
):
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(gzip.compress(b"the main road .\nla \xe9cole\n"))
    argv = run_args(tiny, table, tmp_path / "out", tmp_path / "cache", "--train", str(bad))
    with pytest.raises(SystemExit) as e:
        hf_train.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and err.count("error:") == 1, err
    assert f"--train: {bad} line 2 is not UTF-8 text" in err
    assert not list((tmp_path / "cache" / "truneg-hf-tokens").glob("*.tmp-*"))  # nothing left


def test_streaming_reads_pass_after_pass_and_resumes_exactly(tiny, table, tok, tmp_path, capsys):
    """6 lines, batches of 4: updates cross the passes; a run stopped at update 2 and resumed
    ends with the weights of the run without interruption. Nothing is cached."""
    from safetensors.torch import load_file

    from truneg_fairseq.hf.streamed_text import LINE_BITS, StreamedText

    lines = tiny_corpus_lines(6, seed=12)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n")
    items = iter(StreamedText([text], "--train", tok, 32))
    first = [next(items) for _ in range(12)]
    assert [x["index"] for x in first] == [*range(6), *((1 << LINE_BITS) + i for i in range(6))]
    assert [x["input_ids"] for x in first[6:]] == expected_rows(tok, lines)

    cache, out = tmp_path / "cache", tmp_path / "run"
    argv = run_args(
        tiny, table, out, cache, "--train", str(text), "--streaming", "--max-steps", "4"
    )
    assert hf_train.main(argv) == 0
    assert "streamed" in capsys.readouterr().out
    straight = load_file(str(out / "model.safetensors"))
    # cut short after update 2: the same command goes on from checkpoint-2
    shutil.rmtree(out / "checkpoint-4")
    (out / "model.safetensors").unlink()
    assert hf_train.main(argv) == 0
    log = capsys.readouterr().out
    assert re.search(r"resuming from \S+checkpoint-2\b", log) and "num_updates 4" in log
    resumed = load_file(str(out / "model.safetensors"))
    for k in straight:
        assert torch.allclose(resumed[k], straight[k], atol=1e-6, rtol=1e-5), k
    assert not cache.exists() or not any(cache.rglob("*.arrow"))

    argv = run_args(tiny, table, tmp_path / "c", cache, "--train", str(text), "--streaming")
    with pytest.raises(SystemExit):
        hf_train.main([*argv, "--workers", "1"])
    assert "--streaming reads the text in the training process" in capsys.readouterr().err


@pytest.mark.slow
def test_streaming_two_processes_equal_one_with_gradient_accumulation(
    tiny, table, tmp_path, capsys
):
    """torchrun --nproc_per_node 2 --streaming against one process with --grad-accum 2 over
    three passes of 10 lines: the same statistics at every update and the same weights."""
    from safetensors.torch import load_file

    text = tmp_path / "t.txt"
    text.write_text("\n".join(tiny_corpus_lines(10, seed=13)) + "\n")
    steps = ["--train", str(text), "--streaming", "--max-steps", "4", "--save-steps", "100"]
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONPATH=f"{REPO}{os.pathsep}" + os.environ.get("PYTHONPATH", ""),
    )
    argv = run_args(tiny, table, tmp_path / "two", tmp_path, *steps)
    two = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(REPO / "scripts" / "hf_train.py"), *argv],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert two.returncode == 0, (two.stdout + two.stderr)[-3000:]
    assert "x 2 sequences" in two.stdout
    one = run_args(tiny, table, tmp_path / "one", tmp_path, *steps, "--grad-accum", "2")
    assert hf_train.main(one) == 0
    logs = [two.stdout, capsys.readouterr().out]
    found = [
        re.findall(r"\bnseq ([\d.]+) .*\bppl ([\d.]+) .*num_updates (\d+)$", log, re.M)
        for log in logs
    ]
    assert len(found[0]) == 4 and found[0] == found[1], found
    a, b = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("two", "one"))
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=1e-5), (k, (a[k] - b[k]).abs().max())
