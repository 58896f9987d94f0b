"""Whitespace words -> ``dict.txt`` symbols with each piece's span inside its word.

CLINE labels a piece *replaced* when it overlaps the replaced part of its word, and the Hits
evaluation encodes its sentences the same way, so the spans come from the tokenizer layer: one
encoder for both. Words are tokenized one by one (sentencepiece and GPT-2 BPE never merge across
whitespace, so this equals tokenizing the line), which is what gives each piece its span.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from truneg_fairseq.errors import ClineDataError, CorpusError
from truneg_fairseq.text.spec import SP_SPACE, TokenizerSpec
from truneg_fairseq.text.tokenizers import build_tokenizer

# the tokenizers whose pieces carry spans (whitespace words have no pieces to label)
PIECE_KINDS = ("sentencepiece", "gpt2", "wordpiece")


class PieceEncoder:
    """Tokenizes whitespace words into the symbols of a fairseq ``dict.txt`` (sentencepiece
    pieces, GPT-2 BPE ids as decimal strings, or WordPiece entries) with each piece's span inside
    its word."""

    def __init__(self, spec: TokenizerSpec):
        kind = spec.kind
        if kind not in PIECE_KINDS:
            raise ClineDataError(f"--tokenizer {kind!r}: use one of {', '.join(PIECE_KINDS)}")
        try:
            tok = build_tokenizer(spec)
            if kind == "gpt2":
                tok.bpe  # loads vocab.bpe now, so a missing file is reported here
        except CorpusError as e:
            raise ClineDataError(str(e)) from None
        self.kind = kind
        self.tok = tok
        self.sp = getattr(tok, "sp", None)
        self.bpe = getattr(tok, "bpe", None)

    def encode_words(self, words: Sequence[str]) -> List[List[Tuple[str, int, int]]]:
        """For each word, its pieces as (symbol, start, end); start/end index the word's
        characters (sentencepiece) or UTF-8 bytes (GPT-2), which agree for the ASCII cores that
        are ever replaced."""
        out = []
        if self.kind == "sentencepiece":
            for pieces in self.sp.encode(list(words), out_type=str) if words else []:
                spans, pos = [], 0
                for p in pieces:
                    n = len(p) - 1 if p.startswith(SP_SPACE) else len(p)
                    spans.append((p, pos, pos + n))
                    pos += n
                out.append(spans)
        elif self.kind == "wordpiece":
            # "##" marks a continuation; lower-casing and accent stripping can change a word's
            # length, which tokens_and_labels notices (then the whole word counts as replaced)
            for w in words:
                spans, pos = [], 0
                for p in self.tok.word_pieces(w):
                    n = len(p) - 2 if p.startswith("##") else len(p)
                    spans.append((p, pos, pos + n))
                    pos += n
                out.append(spans)
        else:
            dec = self.bpe.decoder
            for i, w in enumerate(words):
                lead = 1 if i else 0  # GPT-2 keeps the space before a word inside its first token
                spans, pos = [], -lead
                for tid in self.bpe.encode((" " if i else "") + w):
                    n = len(dec[tid])  # byte-level unicode: one character per byte
                    spans.append((str(tid), pos, pos + n))
                    pos += n
                out.append(spans)
        return out

    def tokens_and_labels(
        self, words: Sequence[str], cores: Sequence[Optional[Tuple[int, int]]]
    ) -> Tuple[List[str], List[int]]:
        symbols, labels = [], []
        for word, spans, core in zip(words, self.encode_words(words), cores):
            length = len(word.encode("utf-8")) if self.kind == "gpt2" else len(word)
            exact = spans and spans[-1][2] == length
            for sym, s, e in spans:
                symbols.append(sym)
                if core is None:
                    labels.append(0)
                elif not exact:  # normalization changed the length: label the whole word
                    labels.append(1)
                else:
                    labels.append(int(s < core[1] and e > core[0]))
        return symbols, labels
