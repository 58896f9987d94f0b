"""truneg_fairseq.models.hub: fairseq's hub interface over the plugin's checkpoints with no
``import truneg_fairseq`` beforehand, and fill_mask on a WordPiece model decoding its
predictions into words with the right spaces.

The model is a tiny random BERT saved by transformers and imported by the real convert_hf.py
(model.pt, dict.txt, vocab.txt); copies of it have a masked-LM output bias that makes the head
predict one chosen piece (a word start or a ``##`` continuation), so the filled text is known."""

import os
import re
import subprocess
import sys

import pytest
import torch
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, fairseq_train
from hf_fixtures import save_bert, wordpiece_vocab
from repo_paths import REPO

from truneg_fairseq.checkpoints import CheckpointError
from truneg_fairseq.models.hub import fill_wordpiece, from_pretrained

MASKED = "the big house <mask> near the small lake"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    save_bert(root / "hf", vocab=wordpiece_vocab())
    proc = run_script("convert_hf.py", ["import", str(root / "hf"), str(root / "imp")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    imp = root / "imp"
    state = torch.load(imp / "model.pt", map_location="cpu", weights_only=False)
    (key,) = [k for k in state["model"] if k.endswith("lm_head.bias")]
    symbols = [line.split()[0] for line in (imp / "dict.txt").read_text().splitlines()]
    for piece, name in (("at", "word"), ("##s", "cont")):
        bias = state["model"][key]
        bias.zero_()
        bias[4 + symbols.index(piece)] = 1000.0  # 4 specials before dict.txt's entries
        torch.save(state, imp / f"{name}.pt")
    return imp


def test_fill_mask_decodes_wordpieces_with_the_right_spaces(imported):
    word = from_pretrained(imported, checkpoint_file="word.pt")
    top = word.fill_mask(MASKED, topk=3)
    assert top[0][0] == "the big house at near the small lake" and top[0][2] == "at"
    assert top[0][1] > 0.99 and len(top) == 3
    # the mask glued to the word before it: a word-start piece still gets its space
    assert word.fill_mask("the big house<mask> near")[0][0] == "the big house at near"
    cont = from_pretrained(imported, checkpoint_file="cont.pt")
    # the mask written against "house" asks for the rest of the word: "##s" glued on
    (text, prob, piece) = cont.fill_mask("the big house<mask> near the small lake", topk=1)[0]
    assert (text, piece) == ("the big houses near the small lake", "##s") and prob > 0.99
    # a mask with a space before it is a whole word: whole words only, however likely "##s"
    top = cont.fill_mask(MASKED, topk=5)
    assert len(top) == 5 and not any(p.startswith("##") for _, _, p in top)
    assert all(t == MASKED.replace("<mask>", p) for t, _, p in top)
    assert sum(prob for _, prob, _ in top) < 0.01  # the model's probabilities, not renormalised
    # the rest of fairseq's interface works on the same object
    tokens = word.encode("the big house")
    assert word.decode(tokens) == "the big house"
    assert word.extract_features(tokens).shape == (1, len(tokens), 32)


@pytest.mark.parametrize(
    "masked, piece, want",
    [
        ("a <mask> b", "at", "a at b"),
        ("a<mask> b", "at", "a at b"),
        ("<mask> is big", "it", "it is big"),
        ("a house<mask> .", "##s", "a houses ."),
        ("a house<mask>", "##s", "a houses"),
        ("a house<mask>", "at", "a house at"),
        ("a house <mask> .", "##s", "a house ##s ."),
        ("<mask> house", "##s", "##s house"),
    ],
)
def test_fill_wordpiece_cases(masked, piece, want):
    assert fill_wordpiece(masked, piece) == want


@pytest.mark.slow
def test_a_new_interpreter_needs_no_plugin_import(imported):
    """The hub entry registers the plugin by itself; fairseq's own entry without the import
    fails inside torch's unpickler (the limitation the module docstring states)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    ours = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom truneg_fairseq.models.hub import from_pretrained\n"
            f"lm = from_pretrained({str(imported)!r}, checkpoint_file='word.pt')\n"
            f"print(lm.fill_mask({MASKED!r})[0][0])",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(imported.parent),
    )
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert ours.stdout.strip().splitlines()[-1] == "the big house at near the small lake"
    fairseq_alone = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fairseq.models.roberta import RobertaModel\n"
            f"RobertaModel.from_pretrained({str(imported)!r}, checkpoint_file='word.pt')",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(imported.parent),
    )
    assert fairseq_alone.returncode != 0 and "Unpickl" in fairseq_alone.stderr


def test_fill_mask_serves_an_electra_generator(imported, tmp_path):
    """A tiny ELECTRA trained (1 real update) on text binarized with the import's dictionary:
    fill_mask asks its generator, the checkpoint and the dictionary in different places."""
    from truneg_fairseq.data import corpus_steps

    lines = tiny_corpus_lines(60, seed=5)
    corpus_steps.atomic_write_lines(tmp_path / "train.txt", lines[:50])
    corpus_steps.atomic_write_lines(tmp_path / "valid.txt", lines[50:])
    data = corpus_steps.binarize(
        tmp_path / "train.txt",
        tmp_path / "valid.txt",
        tmp_path / "bin",
        srcdict=imported / "dict.txt",
    )
    fairseq_train(
        data,
        tmp_path / "ck",
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "1"],
    )
    lm = from_pretrained(
        tmp_path / "ck",
        checkpoint_file="checkpoint_last.pt",
        data_name_or_path=str(data),
        vocab=str(imported / "vocab.txt"),
    )
    top = lm.fill_mask(MASKED, topk=4)
    probs = [p for _, p, _ in top]
    assert len(top) == 4 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    assert all(text == fill_wordpiece(MASKED, piece) for text, _, piece in top)


def test_a_trained_checkpoint_with_a_sentencepiece_config(corpus_dir, data_bin, tmp_path):
    """A RoBERTa trained (1 update) on the session corpus: no tokenizer in its config is one
    error saying what to give; with fairseq's sentencepiece BPE config the interface encodes,
    decodes and fills the mask."""
    fairseq_train(
        data_bin,
        tmp_path / "ck",
        ["--criterion", "masked_lm", *TINY_ROBERTA, "--max-update", "1", "--disable-validation"],
    )
    where = dict(checkpoint_file="checkpoint_last.pt", data_name_or_path=str(data_bin))
    bare = from_pretrained(tmp_path / "ck", **where)
    with pytest.raises(CheckpointError, match="no tokenizer to encode text"):
        bare.fill_mask("the farmer will <mask> at home")
    spm = {"_name": "sentencepiece", "sentencepiece_model": str(corpus_dir / "spm.model")}
    lm = from_pretrained(tmp_path / "ck", bpe=spm, **where)
    assert lm.decode(lm.encode("the farmer will stay at home")) == "the farmer will stay at home"
    top = lm.fill_mask("the farmer will <mask> at home", topk=2)
    assert len(top) == 2 and all(text.startswith("the farmer will ") for text, _, _ in top)
    # fairseq's hub keywords: the BPE's name and its fields as keywords
    kw = from_pretrained(
        tmp_path / "ck",
        bpe="sentencepiece",
        sentencepiece_model=spm["sentencepiece_model"],
        **where,
    )
    assert kw.fill_mask("the farmer will <mask> at home", topk=2) == top
    # the tokenizer recorded beside dict.txt (as prepare_corpus.py writes it) needs no keyword
    import shutil

    from truneg_fairseq.text import TokenizerSpec
    from truneg_fairseq.text.record import write_record
    from truneg_fairseq.text.tokenizers import build_tokenizer

    recorded = tmp_path / "recorded"
    shutil.copytree(data_bin, recorded)
    spec = TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    write_record(recorded, build_tokenizer(spec))
    own = from_pretrained(
        tmp_path / "ck", checkpoint_file="checkpoint_last.pt", data_name_or_path=str(recorded)
    )
    assert own.fill_mask("the farmer will <mask> at home", topk=2) == top


def test_fill_mask_on_a_whitespace_tokenized_checkpoint(tmp_path):
    """The demo's and the study's data: whitespace words, the tokenizer recorded by the data's
    preparation; fill_mask fills in one dictionary word, with no tokenizer given."""
    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.text import TokenizerSpec
    from truneg_fairseq.text.record import write_record
    from truneg_fairseq.text.tokenizers import build_tokenizer

    lines = tiny_corpus_lines(60, seed=3)
    corpus_steps.atomic_write_lines(tmp_path / "train.txt", lines[:50])
    corpus_steps.atomic_write_lines(tmp_path / "valid.txt", lines[50:])
    data = corpus_steps.binarize(tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "bin")
    write_record(data, build_tokenizer(TokenizerSpec("whitespace")))
    fairseq_train(
        data,
        tmp_path / "ck",
        ["--criterion", "masked_lm", *TINY_ROBERTA, "--max-update", "1", "--disable-validation"],
    )
    lm = from_pretrained(
        tmp_path / "ck", checkpoint_file="checkpoint_last.pt", data_name_or_path=str(data)
    )
    words = {line.split()[0] for line in (tmp_path / "bin" / "dict.txt").read_text().splitlines()}
    masked = "the farmer will <mask> at home"
    top = lm.fill_mask(masked, topk=3)
    assert len(top) == 3
    for text, prob, piece in top:
        assert 0 < prob <= 1
        assert text == masked.replace("<mask>", piece) and (piece in words or piece == "<unk>")
    assert lm.decode(lm.encode("the farmer will stay")) == "the farmer will stay"


def test_bad_places_are_one_error_naming_them(imported, tmp_path):
    with pytest.raises(CheckpointError, match="is not a directory"):
        from_pretrained(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="missing.pt"):
        from_pretrained(imported, checkpoint_file="missing.pt")
    with pytest.raises(CheckpointError, match="vocab .*other.txt not found"):
        from_pretrained(imported, checkpoint_file="word.pt", vocab=str(tmp_path / "other.txt"))


def _no_network(monkeypatch) -> list:
    """Every way this process could reach the network (sockets, name lookups, urllib, and
    fairseq's download and path-manager entries, which run before any socket) refuses and is
    recorded in the list returned."""
    import socket
    import urllib.request

    from fairseq import file_utils

    attempts = []

    def refuse(what):
        def blocked(*args, **kwargs):
            attempts.append((what, repr(args[:2])[:200]))
            raise OSError(f"no network in this test ({what})")

        return blocked

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(urllib.request, "urlopen", refuse("urlopen"))
    monkeypatch.setattr(file_utils, "get_from_cache", refuse("fairseq download"))
    monkeypatch.setattr(file_utils, "cached_path_from_pm", refuse("fairseq path manager"))
    return attempts


def test_every_registered_bpe_and_tokenizer_is_known_to_the_file_check():
    """A BPE or tokenizer fairseq (or the plugin) registers that the check does not know would
    be refused by every loader: a new one must be added with the files it reads."""
    from fairseq.registry import REGISTRIES

    from truneg_fairseq.checkpoint_schema.encoder_files import FILE_FIELDS

    for kind in ("bpe", "tokenizer"):
        assert set(REGISTRIES[kind]["registry"]) == set(FILE_FIELDS[kind]), kind


def _local_files(root, imported, spm_model) -> dict:
    """A local file for every file field of a registered BPE, each of the kind it reads."""
    import shutil

    root.mkdir()
    (root / "encoder.json").write_text('{"a": 0, "b": 1}')
    (root / "merges.txt").write_text("#version: 0.2\n")
    (root / "codes").write_text("a b\n")
    shutil.copy(spm_model, root / "spm.model")
    vocab = str(imported / "vocab.txt")
    return {
        "gpt2_encoder_json": str(root / "encoder.json"),
        "gpt2_vocab_bpe": str(root / "merges.txt"),
        "sentencepiece_model": str(root / "spm.model"),
        "sentencepiece_model_path": str(root / "spm.model"),
        "bpe_codes": str(root / "codes"),
        "bpe_vocab": str(root / "encoder.json"),
        "bpe_merges": str(root / "merges.txt"),
        "bpe_vocab_file": vocab,
        "wordpiece_vocab": vocab,
    }


def test_a_local_checkpoint_fetches_nothing_whatever_its_tokenizer_config(
    imported, corpus_dir, tmp_path, monkeypatch
):
    """Every BPE and tokenizer fairseq registers, named in a checkpoint's config with no files
    (fairseq's GPT-2 would download its defaults, its BERT ask the HuggingFace hub), with local
    files, with a file that is not there: the hub loads it or says in one error which file to
    give, and nothing reaches the network."""
    from fairseq.registry import REGISTRIES

    from truneg_fairseq.checkpoint_schema.encoder_files import FILE_FIELDS

    files = _local_files(tmp_path / "files", imported, corpus_dir / "spm.model")
    base = torch.load(imported / "model.pt", map_location="cpu", weights_only=True)
    attempts = _no_network(monkeypatch)

    def load(kind, section, name):
        state = dict(base, cfg=dict(base["cfg"], **{kind: section}))
        ck = tmp_path / name
        ck.mkdir()
        torch.save(state, ck / "model.pt")
        return ck, lambda **kw: from_pretrained(ck, data_name_or_path=str(imported), **kw)

    for kind in ("bpe", "tokenizer"):
        for name in sorted(REGISTRIES[kind]["registry"]):
            reads = FILE_FIELDS[kind][name]
            ck, hub = load(kind, {"_name": name}, f"{kind}-{name}-bare")
            if not reads:
                assert hub().fill_mask(MASKED, topk=1)
                continue
            with pytest.raises(CheckpointError) as e:
                hub()
            said = str(e.value)
            assert said.startswith(f"{ck / 'model.pt'}: {kind}.{reads[0]} is not given"), said
            assert "nothing is downloaded" in said and f"'_name': {name!r}" in said
            ck, hub = load(kind, {"_name": name, **{f: files[f] for f in reads}}, f"{name}-local")
            try:
                hub()  # built from the local files
            except CheckpointError as e:  # a package it needs is not installed, in words
                assert str(e).startswith(f"{ck / 'model.pt'}: the {name} BPE"), str(e)
            if name == "gpt2":  # vocab= says the tokenizer: the checkpoint's own is not built
                ck, hub = load(kind, {"_name": name}, "gpt2-vocab")
                lm = hub(vocab=str(imported / "vocab.txt"))
                assert lm.fill_mask(MASKED, topk=1)[0][0].startswith("the big house ")
    missing = {"_name": "sentencepiece", "sentencepiece_model": str(tmp_path / "no.model")}
    ck, hub = load("bpe", missing, "spm-missing")
    with pytest.raises(CheckpointError, match=re.escape(f"{ck / 'model.pt'}: bpe.sentencepiece")):
        hub()
    assert attempts == []


def test_evaluate_fetches_nothing_whatever_the_checkpoints_tokenizer_config(
    plain_checkpoint, data_bin, tmp_path, monkeypatch
):
    """truneg-evaluate on a checkpoint whose config names fairseq's GPT-2 BPE and the moses
    tokenizer with no files: it scores with the data's own tokenizer and reaches nothing."""
    state = torch.load(plain_checkpoint, map_location="cpu", weights_only=True)
    state["cfg"]["bpe"] = {"_name": "gpt2"}
    state["cfg"]["tokenizer"] = {"_name": "moses"}
    torch.save(state, tmp_path / "model.pt")
    attempts = _no_network(monkeypatch)
    proc = run_script("evaluate_mlm.py", ["--data", str(data_bin), str(tmp_path / "model.pt")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert attempts == []
