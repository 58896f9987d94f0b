"""Tiny real data for the tests: a corpus rich in WordNet synonym pairs, its sentencepiece
model and fairseq data-bin, a classification set, a byte-level GPT-2 BPE and a word-level data-bin
with its synonym table."""

import random
from pathlib import Path
from typing import List, Sequence

# Sentences rich in WordNet synonym pairs (primary/main/chief, stay/remain, big/large, ...).
_SUBJ = [
    "the farmer",
    "the teacher",
    "a child",
    "my friend",
    "the old man",
    "the doctor",
    "her sister",
    "the pilot",
]


_VERB = [
    "will stay",
    "will remain",
    "wants to stay",
    "decided to remain",
    "had to stay",
    "chose to remain",
]


_PLACE = [
    "at home",
    "in the big house",
    "in the large house",
    "near the small lake",
    "by the little lake",
    "in the town",
]


_ADJ = ["primary", "main", "chief", "principal", "big", "large", "quick", "fast", "small", "little"]


_NOUN = ["reason", "problem", "goal", "road", "question", "idea", "answer", "river"]


def tiny_corpus_lines(n: int = 1500, seed: int = 0) -> List[str]:
    rng = random.Random(seed)
    lines = []
    letters = "bcdfgklmnprstvz"
    for _ in range(n):
        if rng.random() < 0.1:  # rare made-up words: split into continuation pieces
            rare = "".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(4))
            lines.append(f"the {rare} is {rng.choice(_ADJ)} .")
        elif rng.random() < 0.5:
            lines.append(f"{rng.choice(_SUBJ)} {rng.choice(_VERB)} {rng.choice(_PLACE)} .")
        else:
            lines.append(
                f"the {rng.choice(_ADJ)} {rng.choice(_NOUN)} of {rng.choice(_SUBJ)} is the "
                f"{rng.choice(_ADJ)} {rng.choice(_NOUN)} ."
            )
    return lines


def make_corpus(workdir: Path, lines: Sequence[str] = None, vocab_size: int = 200) -> Path:
    """raw text -> sentencepiece -> fairseq-preprocess; returns the data-bin directory."""
    from truneg_fairseq.data import corpus_steps

    workdir = Path(workdir)
    lines = list(lines) if lines is not None else tiny_corpus_lines()
    train, valid, _, _ = corpus_steps.write_split_corpus(
        lines, workdir / "raw", valid_fraction=0.1, seed=1
    )
    model = corpus_steps.train_sentencepiece(
        train, workdir / "spm", vocab_size=vocab_size, model_type="bpe"
    )
    for split, path in (("train", train), ("valid", valid)):
        corpus_steps.encode_file(model, path, workdir / "tok" / f"{split}.txt")
    return corpus_steps.binarize(
        workdir / "tok" / "train.txt", workdir / "tok" / "valid.txt", workdir / "data-bin"
    )


def make_classification_data(corpus_dir: Path, out_dir: Path) -> Path:
    """A two-class sentence_prediction data set (input0/, label/) binarized with the
    pre-training dictionary: label 1 for sentences about staying/remaining."""
    from truneg_fairseq.data import corpus_steps

    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    lines = tiny_corpus_lines(240, seed=7)
    labels = ["1" if (" stay " in line or " remain " in line) else "0" for line in lines]
    raw = out_dir / "raw"
    for split, sl in (("train", slice(0, 200)), ("valid", slice(200, 240))):
        corpus_steps.atomic_write_lines(raw / f"{split}.txt", lines[sl])
        corpus_steps.atomic_write_lines(raw / f"{split}.label", labels[sl])
        corpus_steps.encode_file(
            corpus_dir / "spm.model", raw / f"{split}.txt", raw / f"{split}.tok"
        )
    corpus_steps.binarize(
        raw / "train.tok",
        raw / "valid.tok",
        out_dir / "input0",
        srcdict=corpus_dir / "data-bin" / "dict.txt",
    )
    corpus_steps.binarize(raw / "train.label", raw / "valid.label", out_dir / "label")
    return out_dir


def write_toy_gpt2_bpe(
    out_dir: Path,
    merges=(("\u0120", "t"), ("\u0120t", "h"), ("\u0120th", "e"), ("t", "h"), ("th", "e")),
):
    """A tiny byte-level GPT-2 BPE (encoder.json + vocab.bpe in the real formats) and a fairseq
    dict.txt over its ids, for tests of the GPT-2 code paths."""
    import json as _json

    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = list(bytes_to_unicode().values()) + ["".join(m) for m in merges]
    encoder = {tok: i for i, tok in enumerate(vocab)}
    (out_dir / "encoder.json").write_text(_json.dumps(encoder))
    (out_dir / "vocab.bpe").write_text(
        "#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n"
    )
    (out_dir / "dict.txt").write_text("".join(f"{i} 1\n" for i in range(len(vocab))))
    return out_dir


def word_level_data(work: Path, train: Sequence[str], valid: Sequence[str], wn) -> Path:
    """A whitespace-word data-bin of ``train``/``valid`` lines, with the WordNet synonym table of
    its dictionary saved inside (``synonyms.npz``)."""
    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.lexicon import build_table, vocab_view

    corpus_steps.atomic_write_lines(work / "train.txt", train)
    corpus_steps.atomic_write_lines(work / "valid.txt", valid)
    data_bin = corpus_steps.binarize(work / "train.txt", work / "valid.txt", work / "data-bin")
    table, _ = build_table(vocab_view(data_bin / "dict.txt", "whitespace"), source="wordnet", wn=wn)
    table.save(data_bin / "synonyms.npz")
    return data_bin
