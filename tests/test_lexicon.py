"""WordNet provisioning and synonym tables, on real WordNet 3.0 and real sentencepiece: the system
directories skipped on request, a bad WNHOME named, a partial cache rebuilt, a file given as the
cache named."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from command_runs import run_script

from truneg_fairseq.lexicon import SynonymTable, SynonymTableError, build_table, vocab_view
from truneg_fairseq.lexicon.synonyms import stopwords, wordnet_synonyms
from truneg_fairseq.lexicon.wordnet import assemble_nltk_wordnet, lexnames_text


def write_dict(path: Path, words):
    path.write_text("".join(f"{w} {100 - i}\n" for i, w in enumerate(words)))
    return path


def test_wordnet_version_and_paper_example(wn):
    assert wn.get_version() == "3.0"
    syn = wordnet_synonyms("primary", wn, stopwords())
    # the single-word synonyms listed in the paper's Figure 3
    assert {"main", "chief", "principal", "basal", "elementary", "master"} <= syn
    assert "primary" not in syn and not any("_" in s for s in syn)


def test_whitespace_table_primary_main_stay_remain(tmp_path, wn):
    words = [
        "primary",
        "main",
        "chief",
        "stay",
        "remain",
        "banana",
        "the",
        "Primary",
        "Main",
        "primary_coil",
    ]
    d = write_dict(tmp_path / "dict.txt", words)
    view = vocab_view(d, "whitespace")
    table, report = build_table(view, source="wordnet", wn=wn)
    sym = view.symbols
    idx = {s: i for i, s in enumerate(sym)}
    assert idx["main"] in table.synonyms_of(idx["primary"])
    assert idx["chief"] in table.synonyms_of(idx["primary"])
    assert idx["remain"] in table.synonyms_of(idx["stay"])
    assert idx["stay"] in table.synonyms_of(idx["remain"])
    # capitalisation classes pair with each other, not across
    assert table.synonyms_of(idx["Primary"]) == [idx["Main"]]
    assert idx["Main"] not in table.synonyms_of(idx["primary"])
    assert table.synonyms_of(idx["banana"]) == [] and table.synonyms_of(idx["the"]) == []
    # sorted unique pairs, never self pairs
    keys = table.keys()
    assert np.all(np.diff(keys) > 0)
    assert not np.any(table.pairs[:, 0] == table.pairs[:, 1])
    # coverage: non-stopword whole-word entries (not "the", not "primary_coil") with a synonym
    assert report.num_candidates == 8 and report.num_covered == 7


def test_sentencepiece_table_on_real_corpus(corpus_dir, data_bin, wn):
    view = vocab_view(data_bin / "dict.txt", "sentencepiece", spm_model=corpus_dir / "spm.model")
    idx = {s: i for i, s in enumerate(view.symbols)}
    table, report = build_table(view, source="wordnet", wn=wn)
    assert idx["\u2581main"] in table.synonyms_of(idx["\u2581primary"])
    assert idx["\u2581remain"] in table.synonyms_of(idx["\u2581stay"])
    assert idx["\u2581large"] in table.synonyms_of(idx["\u2581big"])
    # continuation pieces are recorded and are never words
    assert len(table.continuation_ids) > 0
    assert all(view.words[i] is None for i in table.continuation_ids)
    assert 0 < report.coverage <= 1


def test_gpt2_vocabulary(tmp_path, wn):
    enc = {
        "\u0120primary": 10,
        "\u0120main": 11,
        "ary": 12,
        "\u0120stay": 13,
        "\u0120remain": 14,
        "<|endoftext|>": 15,
    }
    (tmp_path / "encoder.json").write_text(json.dumps(enc))
    d = write_dict(tmp_path / "dict.txt", ["10", "11", "12", "13", "14", "15"])
    view = vocab_view(d, "gpt2", gpt2_encoder_json=tmp_path / "encoder.json")
    idx = {s: i for i, s in enumerate(view.symbols)}
    table, _ = build_table(view, wn=wn)
    assert table.synonyms_of(idx["10"]) == [idx["11"]]
    assert table.synonyms_of(idx["13"]) == [idx["14"]]
    assert table.continuation_ids.tolist() == [idx["12"]]


def test_embedding_source(tmp_path):
    d = write_dict(tmp_path / "dict.txt", ["cat", "dog", "car", "truck", "kitten"])
    vec = tmp_path / "glove.txt"
    vec.write_text(
        "cat 1 0 0\ndog 0.8 0.2 0\nkitten 0.95 0.05 0\ncar 0 0 1\ntruck 0 0.1 0.9\nunused 1 1 1\n"
    )
    view = vocab_view(d, "whitespace")
    idx = {s: i for i, s in enumerate(view.symbols)}
    table, _ = build_table(view, source="embedding", vectors=vec, topk=1)
    assert table.synonyms_of(idx["cat"]) == [idx["kitten"]]
    assert table.synonyms_of(idx["car"]) == [idx["truck"]]
    # word2vec header is accepted
    w2v = tmp_path / "w2v.txt"
    w2v.write_text("2 3\ncat 1 0 0\nkitten 0.9 0.1 0\n")
    table2, _ = build_table(view, source="embedding", vectors=w2v, topk=10)
    assert table2.synonyms_of(idx["cat"]) == [idx["kitten"]]


def test_save_load_roundtrip_and_atomicity(tmp_path, wn):
    d = write_dict(tmp_path / "dict.txt", ["primary", "main", "stay", "remain"])
    view = vocab_view(d, "whitespace")
    table, _ = build_table(view, wn=wn)
    out = tmp_path / "t" / "syn.npz"
    table.save(out)
    again = SynonymTable.load(out)
    assert np.array_equal(again.pairs, table.pairs) and again.fingerprint == table.fingerprint
    assert again.meta["source"] == "wordnet" and again.meta["wordnet_version"] == "3.0"
    again.check_dictionary(view.symbols + ["<mask>"], out)  # a task may append <mask>
    with pytest.raises(SynonymTableError, match="built for another dictionary"):
        again.check_dictionary(view.symbols[:-1] + ["other"], out)
    assert sorted(os.listdir(out.parent)) == ["syn.npz"]  # no temporary files left
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)

    # a failing write leaves the previous file intact and no temporary file
    bad = SynonymTable(
        table.pairs, table.continuation_ids, table.num_symbols, table.fingerprint, {"x": object()}
    )
    with pytest.raises(TypeError):
        bad.save(out)
    assert sorted(os.listdir(out.parent)) == ["syn.npz"]
    assert np.array_equal(SynonymTable.load(out).pairs, table.pairs)


def test_load_errors(tmp_path):
    with pytest.raises(SynonymTableError, match="not found"):
        SynonymTable.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(SynonymTableError, match="not a synonym table"):
        SynonymTable.load(junk)


def test_assemble_from_princeton_dict_dir(tmp_path):
    target = assemble_nltk_wordnet(Path("/usr/share/wordnet"), tmp_path / "nltk_data")
    assert (target / "lexnames").read_text() == lexnames_text()
    assert len(lexnames_text().splitlines()) == 45
    assert not any(p.is_symlink() for p in target.iterdir())
    code = (
        "import nltk; nltk.data.path[:] = [%r];"
        "from nltk.corpus import wordnet as wn; print(wn.get_version(), "
        "sorted({l.name() for s in wn.synsets('stay') for l in s.lemmas()})[:50])"
    ) % str(tmp_path / "nltk_data")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("3.0") and "remain" in out


def test_no_wordnet_gives_one_clear_error(tmp_path):
    code = (
        "import nltk; nltk.data.path[:] = [%r];"
        "import truneg_fairseq.lexicon.wordnet as w; w.DEFAULT_DICT_DIRS = ();"
        "w.load_wordnet(cache_dir=%r)"
    ) % (str(tmp_path / "empty"), str(tmp_path / "cache"))
    env = dict(os.environ, WNHOME=str(tmp_path / "nowhere"))
    env.pop("NLTK_DATA", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "WordNetNotFoundError: WordNet 3.0 not found" in proc.stderr
    assert "apt-get install wordnet-base" in proc.stderr and "WNHOME" in proc.stderr


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


def test_cli_builds_table_and_reports_coverage(corpus_dir, data_bin, tmp_path):
    out = tmp_path / "syn.npz"
    proc = run_script(
        "build_synonym_table.py",
        [
            "--dict",
            str(data_bin / "dict.txt"),
            "--tokenizer",
            "sentencepiece",
            "--spm-model",
            str(corpus_dir / "spm.model"),
            "--output",
            str(out),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    assert "coverage" in proc.stdout and "synonym pairs" in proc.stdout
    assert len(SynonymTable.load(out)) > 0


@pytest.mark.parametrize(
    "args,message",
    [
        (["--source", "thesaurus"], "invalid choice: 'thesaurus'"),
        (["--source", "embedding"], "--source embedding needs --vectors"),
        (["--tokenizer", "sentencepiece"], "needs --spm-model"),
        (["--dict", "/nonexistent/dict.txt"], "dictionary /nonexistent/dict.txt not found"),
    ],
)
def test_cli_bad_input(data_bin, tmp_path, args, message):
    base = {
        "--dict": str(data_bin / "dict.txt"),
        "--tokenizer": "whitespace",
        "--output": str(tmp_path / "o.npz"),
    }
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    argv = [x for kv in base.items() for x in kv]
    proc = run_script("build_synonym_table.py", argv)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not (tmp_path / "o.npz").exists()


def test_sentencepiece_model_mismatch(corpus_dir, data_bin, tmp_path):
    from truneg_fairseq.data import corpus_steps

    other_txt = tmp_path / "other.txt"
    other_txt.write_text("\n".join(f"zq{i} xv{i} wk{i}" for i in range(300)) + "\n")
    other = corpus_steps.train_sentencepiece(
        other_txt, tmp_path / "other", vocab_size=60, model_type="bpe"
    )
    with pytest.raises(SynonymTableError, match="not produced by this sentencepiece model"):
        vocab_view(data_bin / "dict.txt", "sentencepiece", spm_model=other)


def test_table_building_logs_progress(tmp_path, wn, caplog, monkeypatch):
    """A long WordNet pass says how far it is (here every look-up, the interval set to 0)."""
    from truneg_fairseq.lexicon import synonyms

    monkeypatch.setattr(synonyms, "PROGRESS_SECONDS", 0.0)
    d = write_dict(tmp_path / "dict.txt", ["primary", "main", "chief", "stay", "remain"])
    with caplog.at_level(logging.INFO, logger="truneg_fairseq.lexicon.synonyms"):
        build_table(vocab_view(d, "whitespace"), source="wordnet", wn=wn)
    lines = [r.getMessage() for r in caplog.records if "WordNet synonyms:" in r.getMessage()]
    assert lines[-1] == "WordNet synonyms: 5 of 5 words looked up" and len(lines) == 5
