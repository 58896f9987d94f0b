"""Results that were once wrong in silence, each now one clear error or a logged count: weights
and configs that disagree, another tokenizer's files, unknown-token rates, outputs a command did
not write, damaged HF files, the wrong data flag, a full disk during conversion."""

import json
import re
from pathlib import Path

import pytest
from command_runs import run_script, snapshot
from hf_fixtures import save_bert, wordpiece_vocab

# ---- wrong results in silence become one clear error ----------------------------------------


def test_weights_with_more_layers_than_the_config_are_refused(tmp_path):
    from truneg_fairseq.convert.hf import ConversionError, import_hf

    save_bert(tmp_path / "hf", vocab=wordpiece_vocab())  # 2 layers
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    config["num_hidden_layers"] = 1
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match=r"num_hidden_layers is 1 but the weights have 2"):
        import_hf(tmp_path / "hf", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_generator_with_other_embedding_values_is_refused_unless_allowed(tmp_path):
    from hf_fixtures import save_electra_pair
    from safetensors.torch import load_file, save_file

    from truneg_fairseq.convert.hf import ConversionError, import_hf

    save_electra_pair(tmp_path / "disc", tmp_path / "gen")
    weights = tmp_path / "gen" / "model.safetensors"
    state = load_file(str(weights))
    state["electra.embeddings.word_embeddings.weight"] = (
        state["electra.embeddings.word_embeddings.weight"] + 0.01
    )
    save_file(state, str(weights))
    with pytest.raises(
        ConversionError,
        match="differ in electra.embeddings.word_embeddings.weight.*not a published pair",
    ):
        import_hf(tmp_path / "disc", tmp_path / "out", generator_dir=tmp_path / "gen")
    assert not (tmp_path / "out").exists()
    import_hf(
        tmp_path / "disc",
        tmp_path / "out",
        generator_dir=tmp_path / "gen",
        allow_unshared_embeddings=True,
    )
    assert (tmp_path / "out" / "model.pt").is_file()


def test_export_of_a_cased_vocabulary_without_tokenizer_config_stays_cased(tmp_path):
    """Imported from a directory that does not say whether it lower-cases: the export follows
    the vocabulary (upper-case entries: cased), as the plugin's own WordPiece does."""
    from transformers import AutoTokenizer

    from truneg_fairseq.convert.hf import export_hf, import_hf

    vocab = wordpiece_vocab() + ["The", "Paris", "P"]
    save_bert(tmp_path / "hf", vocab=vocab)
    for name in ("tokenizer_config.json", "tokenizer.json"):
        (tmp_path / "hf" / name).unlink(missing_ok=True)
    import_hf(tmp_path / "hf", tmp_path / "imp")
    assert json.loads((tmp_path / "imp" / "import.json").read_text())["lowercase"] is None
    export_hf(tmp_path / "imp" / "model.pt", tmp_path / "back")
    assert (
        json.loads((tmp_path / "back" / "tokenizer_config.json").read_text())["do_lower_case"]
        is False
    )
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "back"))
    assert tok.tokenize("The Paris") == ["The", "Paris"]


def test_fingerprints_identify_the_tokenizer_not_the_bytes_of_its_file(tmp_path):
    from corpus_fixtures import tiny_corpus_lines

    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.text import (
        TokenizerError,
        TokenizerSpec,
        build_tokenizer,
        check_record,
        write_record,
    )

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(400)) + "\n")
    models = [
        corpus_steps.train_sentencepiece(text, tmp_path / f"run{i}" / "spm", 120, "unigram")
        for i in (1, 2)
    ]
    assert (
        Path(models[0]).read_bytes() != Path(models[1]).read_bytes()
    )  # the trainer section differs
    prints = [
        build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(m))).fingerprint()
        for m in models
    ]
    assert prints[0] == prints[1]
    other = corpus_steps.train_sentencepiece(text, tmp_path / "run3" / "spm", 140, "unigram")
    assert (
        build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(other))).fingerprint()
        != prints[0]
    )

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in wordpiece_vocab()))
    crlf = tmp_path / "crlf" / "vocab.txt"
    crlf.parent.mkdir()
    crlf.write_bytes(vocab.read_bytes().replace(b"\n", b"\r\n"))
    data = tmp_path / "data"
    data.mkdir()
    write_record(
        data, build_tokenizer(TokenizerSpec("wordpiece", vocab=str(vocab), lowercase=True))
    )
    check_record(
        data / "dict.txt",
        build_tokenizer(TokenizerSpec("wordpiece", vocab=str(crlf), lowercase=True)),
    )
    with pytest.raises(TokenizerError, match="lowercase"):
        check_record(
            data / "dict.txt",
            build_tokenizer(TokenizerSpec("wordpiece", vocab=str(crlf), lowercase=False)),
        )
    changed = tmp_path / "changed" / "vocab.txt"
    changed.parent.mkdir()
    changed.write_text("".join(t + "\n" for t in wordpiece_vocab()[:-1]))
    with pytest.raises(TokenizerError, match="is not the file that made"):
        check_record(
            data / "dict.txt",
            build_tokenizer(TokenizerSpec("wordpiece", vocab=str(changed), lowercase=True)),
        )


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


def _file_size_limit(limit: int):
    """preexec_fn: files larger than ``limit`` bytes cannot be written (EFBIG), as on a full disk."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_failed_prepare_corpus_rerun_leaves_the_earlier_outputs_whole(tmp_path):
    """The second run fails while training sentencepiece (its model file cannot be written):
    raw/, spm.*, tok/ and data-bin/ of the first run stay as they were, no staging leftovers, and
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
        preexec_fn=_file_size_limit(100_000),
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
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
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
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
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
from truneg_fairseq.io_utils import staged_entries
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

    from truneg_fairseq.io_utils import staged_entries

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


@pytest.mark.parametrize(
    "case",
    ["pickle_bin", "garbled_safetensors", "truncated_safetensors", "latin1_vocab", "shard_outside"],
)
def test_damaged_or_crafted_hf_files_are_one_error_naming_the_file(tmp_path, case):
    import pickle

    hf = tmp_path / "hf"
    save_bert(hf, vocab=wordpiece_vocab())
    weights = hf / "model.safetensors"
    named = weights
    if case == "pickle_bin":
        weights.unlink()
        named = hf / "pytorch_model.bin"

        class Payload:
            def __reduce__(self):
                return (open, (str(tmp_path / "PWNED"), "w"))

        named.write_bytes(pickle.dumps({"x": Payload()}))
    elif case == "garbled_safetensors":
        weights.write_bytes(b"\xff" * 64 + weights.read_bytes()[64:])
    elif case == "truncated_safetensors":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif case == "latin1_vocab":
        named = hf / "vocab.txt"
        named.write_bytes(named.read_bytes() + "caf\xe9\n".encode("latin-1"))
    else:
        weights.rename(tmp_path / "elsewhere.safetensors")
        named = hf / "model.safetensors.index.json"
        named.write_text(json.dumps({"weight_map": {"x": "../elsewhere.safetensors"}}))
    proc = run_script("convert_hf.py", ["import", str(hf), str(tmp_path / "out")])
    assert proc.returncode == 2, proc.stderr
    assert str(named) in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out").exists()


def test_an_output_that_cannot_be_written_is_one_error(imported_wordpiece, tmp_path):
    proc = run_script(
        "convert_hf.py", ["import", str(imported_wordpiece / "hf"), "/proc/truneg-out/model"]
    )
    assert proc.returncode == 2 and "/proc/truneg-out/model: cannot write there" in proc.stderr
    assert "Traceback" not in proc.stderr
    (tmp_path / "file").write_text("x")
    proc = run_script(
        "convert_hf.py", ["import", str(imported_wordpiece / "hf"), str(tmp_path / "file")]
    )
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr


@pytest.mark.parametrize(
    "script", ["evaluate_mlm.py", "convert_hf.py", "cline_hits.py", "squad_predict.py"]
)
@pytest.mark.parametrize("data", ["empty", "missing"])
def test_a_wrong_data_flag_is_named_not_the_recorded_directory(
    plain_checkpoint, data_bin, tmp_path, script, data
):
    """Every loading path resolves --data the same way: the error names the directory given."""
    given = tmp_path / data
    if data == "empty":
        given.mkdir()
    ck = str(plain_checkpoint)
    triplets = tmp_path / "t.tsv"
    triplets.write_text("a b c\ta b d\ta b e\n")
    args = {
        "evaluate_mlm.py": [ck, "--data", str(given)],
        "convert_hf.py": ["export", ck, str(tmp_path / "exported"), "--data", str(given)],
        "cline_hits.py": [
            ck,
            "--data",
            str(given),
            "--triplets",
            str(triplets),
            "--spm-model",
            str(data_bin.parent / "spm.model"),
        ],
        "squad_predict.py": [
            "--checkpoint",
            ck,
            "--data",
            str(given),
            "--output",
            str(tmp_path / "p.json"),
        ],
    }[script]
    proc = run_script(script, args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    want = (
        f"--data {given}: no such directory"
        if data == "missing"
        else f"--data {given} has no dict.txt"
    )
    assert want in proc.stderr and "Traceback" not in proc.stderr
    assert "recorded" not in proc.stderr and not (tmp_path / "exported").exists()


@pytest.mark.parametrize("command", ["import", "export"])
def test_a_full_disk_during_conversion_is_one_error_and_replaces_nothing(
    imported_wordpiece, plain_checkpoint, corpus_dir, tmp_path, command
):
    """Weight files that cannot be written (a file-size limit: EFBIG, as ENOSPC on a full disk)."""
    spm_model = corpus_dir / "spm.model"
    out = tmp_path / "out"
    args = (
        ["import", str(imported_wordpiece / "hf"), str(out)]
        if command == "import"
        else ["export", str(plain_checkpoint), str(out), "--spm-model", str(spm_model)]
    )
    proc = run_script("convert_hf.py", args, preexec_fn=_file_size_limit(20_000))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{out}: writing failed" in proc.stderr and "nothing was replaced" in proc.stderr
    assert "Traceback" not in proc.stderr and "inline_container" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no leftovers


def test_squad_windows_report_their_unknown_rate(caplog):
    import logging

    from truneg_fairseq.data.squad_windows import Feature
    from truneg_fairseq.tasks.squad import _report_unknown

    features = [Feature(0, [0, 5, 3, 2, 7, 3, 2], 4, []), Feature(1, [0, 5, 2, 7, 8, 9, 2], 3, [])]
    with caplog.at_level(logging.INFO):
        assert _report_unknown(features, 3, "dev.json") == pytest.approx(100 * 2 / 14)
    assert "dev.json: 2 of 14 tokens (14.3%) are <unk>: the tokenizer does not fit" in caplog.text
