"""The word marks a vocabulary's spelling carries: WordPiece's ``##`` (continues a word), GPT-2's
byte-level ``Ġ`` and sentencepiece's ``▁`` (start a word). One place reads them from a list of
entries, for a vocabulary whose tokenizer is not at hand (a HuggingFace tokenizer's entries, a
``dict.txt`` without its record)."""

from typing import Dict, Optional, Sequence, Tuple

from truneg_fairseq.text.spec import GPT2_SPACE, SP_SPACE, WORDPIECE_CONT
from truneg_fairseq.text.tokenizers import is_word

# family -> its mark, in the order a tie between counts is decided
MARKS = {"wordpiece": WORDPIECE_CONT, "gpt2": GPT2_SPACE, "sentencepiece": SP_SPACE}


def word_marks(symbols: Sequence[Optional[str]]) -> Tuple[Optional[str], Dict[str, int]]:
    """(the family whose mark the most entries start with, or None when no entry carries one;
    {family: entries starting with its mark}). ``None`` entries are left out."""
    counts = {
        family: sum(s is not None and s.startswith(mark) for s in symbols)
        for family, mark in MARKS.items()
    }
    family = max(counts, key=counts.get)
    return (family if counts[family] else None), counts


def marked_word(symbol: str, family: str) -> Tuple[Optional[str], bool]:
    """(the surface of a whole-word entry when it is a candidate word, else None; whether the
    entry continues a word) for an entry of a ``family`` vocabulary read by its marks."""
    mark = MARKS[family]
    if family == "wordpiece":
        if symbol.startswith(mark):
            return None, True
        return (symbol if is_word(symbol) else None), False
    if symbol.startswith(mark):
        word = symbol[len(mark) :]
        return (word if is_word(word) else None), False
    return None, True
