"""truneg_fairseq.models.hub: fairseq's hub interface over the plugin's checkpoints with no
``import truneg_fairseq`` beforehand, and fill_mask on a WordPiece model decoding its
predictions into words with the right spaces.

The model is a tiny random BERT saved by transformers and imported by the real convert_hf.py
(model.pt, dict.txt, vocab.txt); copies of it have a masked-LM output bias that makes the head
predict one chosen piece (a word start or a ``##`` continuation), so the filled text is known."""

import os
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
