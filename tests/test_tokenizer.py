"""The tokenizer layer with WordPiece end to end: a tiny BERT-style vocab.txt written here, real
HF ``tokenizers``, real fairseq binarization, real WordNet, fairseq's masked-LM datasets; the
tokenizer record's fingerprint identifies the tokenizer, not the bytes of its file."""

import json
import string
from pathlib import Path

import pytest
import torch
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines
from fairseq.data import Dictionary, data_utils
from fairseq_runs import build_components, valid_batch
from hf_fixtures import wordpiece_vocab
from squad_fixtures import squad_json, squad_span_text

from truneg_fairseq import text as T
from truneg_fairseq.data import squad_windows as squad
from truneg_fairseq.lexicon import SynonymTable, build_table, vocab_view

SPECIALS = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "the a my her of is to at in by near will had chose decided wants want where who what does "
    "farmer teacher child friend old man doctor sister pilot stay remain home big large house small "
    "little lake town primary main chief principal quick fast reason problem goal road question idea "
    "answer river play happy un"
).split()
PIECES = ["##s", "##ing", "##happy", "##ed"]
LETTERS = [c for c in string.ascii_lowercase if c != "a"] + [
    f"##{c}" for c in string.ascii_lowercase if c != "s"
]
VOCAB = SPECIALS + WORDS + [".", ",", "?"] + PIECES + LETTERS
EXTRA = [
    "the farmer is playing near the lake .",
    "the main reasons of the pilot are unhappy .",
    "my friend plays by the river , unhappy .",
    "the chief problems stay .",
]


def write_vocab(path: Path, entries=VOCAB) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(e + "\n" for e in entries), encoding="utf-8")
    return path


def hf_tokenizer(vocab: Path):
    from tokenizers import BertWordPieceTokenizer

    return BertWordPieceTokenizer(str(vocab), lowercase=True)


@pytest.fixture(scope="module")
def wp(tmp_path_factory):
    """vocab.txt and a corpus prepared with prepare_corpus.py --tokenizer wordpiece."""
    root = tmp_path_factory.mktemp("wordpiece")
    vocab = write_vocab(root / "bert" / "vocab.txt")
    text = root / "corpus.txt"
    text.write_text("\n".join(tiny_corpus_lines(300, seed=5) + EXTRA * 3) + "\n")
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(text),
            "--output-dir",
            str(root / "work"),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(vocab),
            "--valid-fraction",
            "0.2",
            "--keep-intermediates",
        ],
    )
    assert proc.returncode == 0, proc.stderr
    return {
        "root": root,
        "vocab": vocab,
        "work": root / "work",
        "data_bin": root / "work" / "data-bin",
    }


def test_dict_lines_keep_the_vocabulary_order_and_size(wp):
    lines = T.wordpiece_dict_lines(wp["vocab"])
    assert [line.rsplit(" ", 1)[0] for line in lines] == [
        t for t in VOCAB if t not in dict(T.BERT_SPECIALS + (T.BERT_MASK,))
    ]
    d = Dictionary.load(str(wp["data_bin"] / "dict.txt"))
    d.add_symbol("<mask>")  # as the masked-LM tasks do
    assert len(d) == len(VOCAB)
    order = T.wordpiece_row_order(VOCAB)
    assert [d[r] for r in range(len(d))] == [T.TO_FAIRSEQ.get(VOCAB[i], VOCAB[i]) for i in order]


def test_corpus_ids_equal_tokenizers_ids(wp):
    d = Dictionary.load(str(wp["data_bin"] / "dict.txt"))
    d.add_symbol("<mask>")
    row_of_hf = {hf: row for row, hf in enumerate(T.wordpiece_row_order(VOCAB))}
    hf = hf_tokenizer(wp["vocab"])
    lines = (wp["work"] / "raw" / "train.txt").read_text().splitlines()
    ds = data_utils.load_indexed_dataset(str(wp["data_bin"] / "train"), d)
    assert len(ds) == len(lines)
    n_pieces = 0
    for i, line in enumerate(lines):
        enc = hf.encode(line, add_special_tokens=False)
        want = [row_of_hf[j] for j in enc.ids] + [d.eos()]
        assert ds[i].tolist() == want, line
        n_pieces += sum(t.startswith("##") for t in enc.tokens)
    assert n_pieces > 0 and d.unk() not in torch.cat([ds[i] for i in range(len(ds))]).tolist()
    rec = json.loads((wp["data_bin"] / T.RECORD_NAME).read_text())
    assert rec["tokenizer"] == "wordpiece" and rec["lowercase"] is True
    assert rec["files"]["vocab"]["path"] == str(wp["vocab"].resolve())


def test_srcdict_must_be_the_vocabulary_dictionary(wp, tmp_path):
    text = wp["work"] / "raw" / "valid.txt"
    good = tmp_path / "dict.txt"
    good.write_text("\n".join(T.wordpiece_dict_lines(wp["vocab"])) + "\n")
    ok = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(text),
            "--output-dir",
            str(tmp_path / "ok"),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(wp["vocab"]),
            "--srcdict",
            str(good),
        ],
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ok" / "data-bin" / "dict.txt").read_text() == good.read_text()
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(reversed(good.read_text().splitlines(keepends=True))))
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(text),
            "--output-dir",
            str(tmp_path / "bad_out"),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(wp["vocab"]),
            "--srcdict",
            str(bad),
        ],
    )
    assert proc.returncode != 0 and "is not the dictionary of --vocab" in proc.stderr
    assert not (tmp_path / "bad_out").exists()


def test_table_pairs_and_continuation_flags(wp, wn):
    view = vocab_view(wp["data_bin"] / "dict.txt", "wordpiece", vocab=wp["vocab"])
    idx = {s: i for i, s in enumerate(view.symbols)}
    table, report = build_table(view, source="wordnet", wn=wn)
    assert idx["main"] in table.synonyms_of(idx["primary"])
    assert idx["chief"] in table.synonyms_of(idx["primary"])
    assert idx["remain"] in table.synonyms_of(idx["stay"])
    assert idx["large"] in table.synonyms_of(idx["big"])
    cont = set(table.continuation_ids.tolist())
    assert {idx[p] for p in PIECES + ["##a", "##z"]} <= cont  # every ## piece continues a word
    assert not cont & {idx[w] for w in WORDS + ["a", "z", "."]}
    for p in PIECES:  # continuation pieces are never words, never corrected, never predictions
        assert view.words[idx[p]] is None and table.synonyms_of(idx[p]) == []
        assert idx[p] not in table.pairs[:, 1]
    assert view.words[idx["[unused0]"]] is None and idx["[unused0]"] not in cont
    assert view.words[idx["primary"]] == "primary" and view.unknown == 0
    assert 0 < report.coverage < 1


def test_build_synonym_table_cli_and_fingerprint_check(wp, tmp_path):
    out = tmp_path / "syn.npz"
    args = ["--dict", str(wp["data_bin"] / "dict.txt"), "--output", str(out)]
    proc = run_script(
        "build_synonym_table.py", [*args, "--tokenizer", "wordpiece", "--vocab", str(wp["vocab"])]
    )
    assert proc.returncode == 0, proc.stderr
    assert "coverage" in proc.stdout and "62.51%" in proc.stdout
    assert len(SynonymTable.load(out)) > 0
    out.unlink()
    # the same entries with a different lower-casing config is another tokenizer
    other = write_vocab(tmp_path / "cased" / "vocab.txt")
    (tmp_path / "cased" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    proc = run_script(
        "build_synonym_table.py", [*args, "--tokenizer", "wordpiece", "--vocab", str(other)]
    )
    assert (
        proc.returncode != 0
        and "lowercase=True" in proc.stderr
        and "--lowercase yes" in proc.stderr
    )
    # another vocabulary file: the message names both files and the fix
    other = write_vocab(tmp_path / "other" / "vocab.txt", VOCAB + ["extra"])
    proc = run_script(
        "build_synonym_table.py", [*args, "--tokenizer", "wordpiece", "--vocab", str(other)]
    )
    assert proc.returncode != 0
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and str(other) in err[0] and str(wp["vocab"].resolve()) in err[0]
    assert T.RECORD_NAME in err[0] and "prepare the data again" in err[0]
    proc = run_script("build_synonym_table.py", [*args, "--tokenizer", "whitespace"])
    assert proc.returncode != 0 and "was made with --tokenizer wordpiece" in proc.stderr
    assert not out.exists()


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


BAD_VOCABS = {
    "spm_vocab": ("spm.vocab", "<unk>\t0\n\u2581the\t-1.2\n", "a sentencepiece .vocab"),
    "encoder_json": (
        "encoder.json",
        json.dumps({"the": 0, "\u0120the": 1}),
        "GPT-2's encoder.json",
    ),
    "dict_txt": ("dict.txt", "the 10\nmain 3\n", "a fairseq dict.txt"),
    "merges": ("vocab.bpe", "#version: 0.2\n\u0120 t\n", "GPT-2 merges"),
    "bpe_tokenizer_json": (
        "tokenizer.json",
        json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}}}),
        "a BPE tokenizer",
    ),
    "no_specials": ("vocab.txt", "the\nmain\n##s\n", "lacks BERT's special entries"),
    "binary": ("spm.model", b"\x0a\xff\xfe\x00", "a sentencepiece .model"),
}


@pytest.mark.parametrize("kind", sorted(BAD_VOCABS))
def test_a_vocabulary_that_is_not_wordpiece_is_one_clear_error(tmp_path, kind):
    name, content, says = BAD_VOCABS[kind]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(T.TokenizerError) as e:
        T.build_tokenizer(T.TokenizerSpec("wordpiece", vocab=str(path)))
    assert str(e.value).startswith(f"--vocab {path} is not a WordPiece vocabulary") and says in str(
        e.value
    )


def test_not_wordpiece_on_the_command_line(wp, tmp_path):
    name, content, _ = BAD_VOCABS["spm_vocab"]
    (tmp_path / name).write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(wp["work"] / "raw" / "valid.txt"),
            "--output-dir",
            str(out),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(tmp_path / name),
        ],
    )
    assert proc.returncode != 0
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"error: --vocab {tmp_path / name} is not a WordPiece vocabulary"
    )
    assert not out.exists()


def _assert_whole_words(task, d):
    sample = valid_batch(task, 64)
    src, tgt = sample["net_input"]["src_tokens"], sample["target"]
    masked = tgt.ne(d.pad())
    original = torch.where(masked, tgt, src)
    cont = torch.tensor([d[i].startswith("##") for i in range(len(d))])
    is_cont = cont[original] & original.ne(d.pad())
    checked = 0
    for b, t in is_cont.nonzero().tolist():
        assert bool(masked[b, t]) == bool(masked[b, t - 1]), (
            b,
            t,
        )  # the pieces of a word go together
        checked += 1
    assert checked > 0 and 0 < int(masked.sum()) < int(original.ne(d.pad()).sum())
    return masked, is_cont


ROBERTA = [
    "--arch",
    "roberta_base",
    "--encoder-layers",
    "1",
    "--encoder-embed-dim",
    "16",
    "--encoder-ffn-embed-dim",
    "32",
    "--encoder-attention-heads",
    "2",
    "--max-positions",
    "64",
    "--tokens-per-sample",
    "64",
]


def test_whole_word_masking_masked_lm_from_the_record(wp):
    task, _, _ = build_components(
        wp["data_bin"],
        ["--criterion", "masked_lm", "--mask-whole-words", "--mask-prob", "0.3"],
        arch_args=ROBERTA,
    )
    masked, is_cont = _assert_whole_words(task, task.source_dictionary)
    assert bool((masked & is_cont).any())  # some continuation pieces were masked, with their word


def test_whole_word_masking_electra_with_flags_and_without(wp, tmp_path):
    from fairseq_runs import TINY_ELECTRA

    flags = ["--electra-tokenizer", "wordpiece", "--electra-vocab", str(wp["vocab"])]
    task, _, _ = build_components(
        wp["data_bin"],
        ["--criterion", "electra", "--mask-whole-words", "--mask-prob", "0.3", *flags],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    _assert_whole_words(task, task.source_dictionary)
    # data without a record and no tokenizer flags: one message saying what to give
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in wp["data_bin"].iterdir():
        if f.name != T.RECORD_NAME:
            (bare / f.name).write_bytes(f.read_bytes())
    with pytest.raises(
        ValueError, match="--mask-whole-words needs the tokenizer of the data: --electra-tokenizer"
    ):
        build_components(
            bare,
            ["--criterion", "electra", "--mask-whole-words"],
            arch_args=TINY_ELECTRA,
            task="electra",
        )


def test_squad_offsets_with_wordpiece(wp, tmp_path):
    d = Dictionary.load(str(wp["data_bin"] / "dict.txt"))
    d.add_symbol("<mask>")
    wt = squad.WordTokenizer(d, "wordpiece", vocab=str(wp["vocab"]))
    text = "The farmer, playing near Lake-house."
    spans, ids = wt.words(text)
    assert [text[s:e] for s, e in spans] == [
        "The",
        "farmer",
        ",",
        "playing",
        "near",
        "Lake",
        "-",
        "house",
        ".",
    ]
    assert ids[3] == [d.index("play"), d.index("##ing")] and ids[2] == [d.index(",")]
    assert ids[6] == [d.unk()]  # "-" is not in the vocabulary: one <unk> for the word
    path = tmp_path / "t.json"
    path.write_text(json.dumps(squad_json(1, broken=True)))
    data = squad.build_features(
        squad.load_squad_json(path), wt, max_len=24, doc_stride=6, max_query=8, train=True
    )
    assert len(data.features) > len(data.examples)  # contexts are split into windows
    hits = 0
    for f in data.features:
        if f.start:
            ex = data.examples[f.example]
            assert squad_span_text(ex, data.words[f.example], f, f.start, f.end) == ex.answers[0]
            hits += 1
    assert hits >= len(data.examples)


def test_glue_preparation_with_wordpiece(wp, tmp_path):
    from glue_fixtures import write_glue

    glue = write_glue(tmp_path / "glue")
    out = tmp_path / "glue-bin"
    proc = run_script(
        "prepare_glue.py",
        [
            "--glue-dir",
            str(glue),
            "--output-dir",
            str(out),
            "--tasks",
            "RTE",
            "--dict",
            str(wp["data_bin"] / "dict.txt"),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(wp["vocab"]),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    d = Dictionary.load(str(out / "RTE" / "input0" / "dict.txt"))
    assert d.symbols == Dictionary.load(str(wp["data_bin"] / "dict.txt")).symbols
    ds = data_utils.load_indexed_dataset(str(out / "RTE" / "input0" / "train"), d)
    tok = T.build_tokenizer(T.TokenizerSpec("wordpiece", vocab=str(wp["vocab"])))
    from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted

    first = read_split_counted(TASKS["RTE"], glue / "RTE" / "train.tsv")[0][0].text1
    assert ds[0].tolist() == tok.encode_ids(first, d) + [d.eos()]
    # a tokenizer other than the recorded one is refused before anything is written
    proc = run_script(
        "prepare_glue.py",
        [
            "--glue-dir",
            str(glue),
            "--output-dir",
            str(tmp_path / "x"),
            "--tasks",
            "RTE",
            "--dict",
            str(wp["data_bin"] / "dict.txt"),
            "--tokenizer",
            "whitespace",
        ],
    )
    assert proc.returncode != 0 and "was made with --tokenizer wordpiece" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_word_starts_of_every_kind(tmp_path, corpus_dir):
    from corpus_fixtures import write_toy_gpt2_bpe

    sp = T.build_tokenizer(
        T.TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    assert sp.classify("\u2581main") == (T.START, "main") and not sp.starts_word(
        sp.pieces("bacedifo")[-1]
    )
    bpe = write_toy_gpt2_bpe(tmp_path / "bpe")
    g = T.build_tokenizer(
        T.TokenizerSpec(
            "gpt2",
            gpt2_encoder_json=str(bpe / "encoder.json"),
            gpt2_vocab_bpe=str(bpe / "vocab.bpe"),
        )
    )
    enc = json.loads((bpe / "encoder.json").read_text())
    assert (
        g.classify(str(enc["\u0120the"])) == (T.START, "the")
        and g.classify(str(enc["t"]))[0] == T.CONTINUATION
    )
    assert g.word_pieces("the") == [str(enc["\u0120the"])]
    w = T.build_tokenizer(
        T.TokenizerSpec("wordpiece", vocab=str(write_vocab(tmp_path / "v" / "vocab.txt")))
    )
    assert w.pieces("Playing [MASK] xq!") == ["play", "##ing", "<mask>", "x", "##q", "<unk>"]
    assert [w.classify(s)[0] for s in ("play", "##ing", "<mask>", "zebra")] == [
        T.START,
        T.CONTINUATION,
        T.CONTROL,
        T.UNKNOWN,
    ]
    assert T.build_tokenizer(T.TokenizerSpec("whitespace")).pieces(" a  b ") == ["a", "b"]
    # the fingerprint follows the files' bytes and WordPiece's lower-casing
    cased = T.build_tokenizer(
        T.TokenizerSpec("wordpiece", vocab=str(tmp_path / "v" / "vocab.txt"), lowercase=False)
    )
    assert w.lowercase is True and cased.fingerprint() != w.fingerprint()
    with pytest.raises(T.TokenizerError, match="--tokenizer gpt2 needs --gpt2-encoder-json"):
        T.build_tokenizer(T.TokenizerSpec("gpt2"))
