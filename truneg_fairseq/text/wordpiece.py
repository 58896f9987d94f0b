"""WordPiece vocabularies (BERT's ``vocab.txt`` or a WordPiece ``tokenizer.json``): the one
reader (:func:`read_wordpiece_vocab`), the ``dict.txt`` that keeps a model's vocabulary size and
order (:func:`wordpiece_dict_lines`: fairseq's four specials first, ``<mask>`` added last by the
masked-LM tasks, every other entry in vocabulary id order), joining pieces back into text
(:func:`join_wordpieces`)."""

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.text.spec import (
    BERT_MASK,
    BERT_SPECIALS,
    TO_FAIRSEQ,
    WORDPIECE_CONT,
    TokenizerError,
)


def _not_wordpiece(path, why: str, flag: str = "--vocab") -> TokenizerError:
    return TokenizerError(
        f"{flag} {path} is not a WordPiece vocabulary: {why}. --tokenizer wordpiece needs BERT's vocab.txt "
        "(one entry per line, [UNK] [CLS] [SEP] [PAD] [MASK] among them) or a WordPiece tokenizer.json"
    )


def read_wordpiece_vocab(path, flag: str = "--vocab") -> Tuple[List[str], Optional[bool]]:
    """(entries in id order, lowercase as the vocabulary's config says or None) of a WordPiece
    ``vocab.txt`` or a WordPiece ``tokenizer.json``. Anything else (a sentencepiece model or
    vocabulary, GPT-2's encoder.json or vocab.bpe, a fairseq dict.txt) is one clear error."""
    path = Path(path)
    if not path.is_file():
        raise TokenizerError(f"{flag} {path} not found (the WordPiece vocab.txt of the model)")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        hint = (
            " (a sentencepiece .model? use --tokenizer sentencepiece --spm-model)"
            if path.suffix == ".model"
            else ""
        )
        raise _not_wordpiece(path, f"not UTF-8 text{hint}", flag) from None
    lowercase = _config_lowercase(path.parent)
    if text.lstrip().startswith("{"):
        vocab, json_lowercase = _tokenizer_json_vocab(path, text, flag)
        lowercase = json_lowercase if lowercase is None else lowercase
    else:
        vocab = _vocab_txt_entries(path, text, flag)
    seen: Dict[str, int] = {}
    for i, tok in enumerate(vocab):
        if tok in seen:
            raise _not_wordpiece(
                path, f"entry {tok!r} appears twice (lines {seen[tok] + 1} and {i + 1})", flag
            )
        seen[tok] = i
    missing = [hf for hf in TO_FAIRSEQ if hf not in seen]
    if missing:
        raise _not_wordpiece(path, f"it lacks BERT's special entries {' '.join(missing)}", flag)
    clash = [fs for fs in TO_FAIRSEQ.values() if fs in seen]
    if clash:
        raise _not_wordpiece(
            path, f"it holds fairseq's own symbols {' '.join(clash)}, which cannot be mapped", flag
        )
    return list(vocab), lowercase


def _tokenizer_json_vocab(path: Path, text: str, flag: str) -> Tuple[List[str], Optional[bool]]:
    """(entries in id order, the normalizer's lowercase or None) of a WordPiece tokenizer.json."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        raise _not_wordpiece(path, f"JSON that cannot be read ({e})", flag) from None
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict):
        raise _not_wordpiece(
            path,
            "a JSON file without a tokenizer model (GPT-2's encoder.json? use "
            "--tokenizer gpt2 --gpt2-encoder-json)",
            flag,
        )
    if model.get("type") != "WordPiece":
        raise _not_wordpiece(path, f"tokenizer.json of a {model.get('type')} tokenizer", flag)
    ids = model.get("vocab") or {}
    vocab: List[Optional[str]] = [None] * len(ids)
    for tok, i in ids.items():
        if not isinstance(i, int) or not 0 <= i < len(ids) or vocab[i] is not None:
            raise _not_wordpiece(path, f"its ids are not 0..{len(ids) - 1} without gaps", flag)
        vocab[i] = tok
    norm = spec.get("normalizer") or {}
    return vocab, (
        bool(norm["lowercase"]) if isinstance(norm, dict) and "lowercase" in norm else None
    )


def _vocab_txt_entries(path: Path, text: str, flag: str) -> List[str]:
    """The entries of a vocab.txt (one per line); other text formats are named in the error."""
    vocab = [line.rstrip("\r") for line in text.split("\n")]
    while vocab and vocab[-1] == "":
        vocab.pop()
    if vocab and vocab[0].startswith("#version"):
        raise _not_wordpiece(path, "GPT-2 merges (vocab.bpe); use --tokenizer gpt2", flag)
    bad = next((i for i, t in enumerate(vocab) if not t or any(c.isspace() for c in t)), None)
    if bad is not None:
        line = vocab[bad]
        why = f"line {bad + 1} ({line[:40]!r}) is empty or holds whitespace"
        if "\t" in line:
            why += " (a sentencepiece .vocab? use --tokenizer sentencepiece --spm-model X.model)"
        elif line.rsplit(" ", 1)[-1].isdigit():
            why += " (a fairseq dict.txt? give the vocabulary it was made from)"
        raise _not_wordpiece(path, why, flag)
    return vocab


def _config_lowercase(folder: Path) -> Optional[bool]:
    """``do_lower_case`` from tokenizer_config.json or config.json beside the vocabulary."""
    for name in ("tokenizer_config.json", "config.json"):
        p = folder / name
        if p.is_file():
            try:
                value = json.loads(p.read_text(encoding="utf-8")).get("do_lower_case")
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                continue
            if value is not None:
                return bool(value)
    return None


def uncased(vocab: Sequence[str]) -> bool:
    """True when no entry outside the bracketed specials holds an upper-case letter."""
    return not any(t != t.lower() for t in vocab if not (t.startswith("[") and t.endswith("]")))


def wordpiece_row_order(vocab: Sequence[str]) -> List[int]:
    """Vocabulary ids in fairseq's row order: [CLS] [PAD] [SEP] [UNK] (fairseq's <s> <pad> </s>
    <unk>), every other entry in id order, [MASK] (fairseq's <mask>, appended by the masked-LM
    tasks). ``vocab`` must hold the five specials once each (see :func:`read_wordpiece_vocab`)."""
    index = {t: i for i, t in enumerate(vocab)}
    special = {index[hf] for hf in TO_FAIRSEQ}
    rest = [i for i in range(len(vocab)) if i not in special]
    return [index[hf] for hf, _ in BERT_SPECIALS] + rest + [index[BERT_MASK[0]]]


def wordpiece_dict_lines(vocab_path) -> List[str]:
    """The ``dict.txt`` lines (``entry 1``) for a WordPiece vocabulary file: every entry but the
    five specials, in vocabulary id order. fairseq's Dictionary adds ``<s> <pad> </s> <unk>``
    before them and the masked-LM tasks add ``<mask>`` after, so the dictionary has exactly the
    vocabulary's size and fairseq row ``r`` is vocabulary id ``wordpiece_row_order(vocab)[r]``."""
    return dict_lines_of(read_wordpiece_vocab(vocab_path)[0])


def dict_lines_of(vocab: Sequence[str]) -> List[str]:
    """The ``dict.txt`` lines of a checked WordPiece vocabulary (see :func:`wordpiece_dict_lines`)."""
    return [f"{vocab[i]} 1" for i in wordpiece_row_order(vocab)[len(BERT_SPECIALS) : -1]]


def join_wordpieces(pieces: Sequence[str]) -> str:
    """Text of WordPiece entries: a ``##`` piece is glued to the one before it."""
    out = ""
    for p in pieces:
        out += (
            p[len(WORDPIECE_CONT) :]
            if p.startswith(WORDPIECE_CONT) and out
            else (" " + p if out else p)
        )
    return out


# ---------------------------------------------------------------------------------------------
# fairseq's BPE registry: ``--bpe wordpiece`` (word starts for whole-word masking)
# ---------------------------------------------------------------------------------------------
