"""The tokenizers: sentencepiece, GPT-2 byte-level BPE, WordPiece and whitespace, one interface
(:class:`Tokenizer`, see the package docstring), built from a :class:`TokenizerSpec` by
:func:`build_tokenizer`."""

import abc
import argparse
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.text.record import content_digest
from truneg_fairseq.text.spec import (
    FROM_FAIRSEQ,
    GPT2_SPACE,
    SP_SPACE,
    TO_FAIRSEQ,
    WORDPIECE_CONT,
    TokenizerError,
    TokenizerSpec,
)
from truneg_fairseq.text.wordpiece import read_wordpiece_vocab, uncased


def is_word(s: str) -> bool:
    """A candidate whole word: ASCII letters only."""
    return s.isascii() and s.isalpha()


def split_words(text: str) -> List[Tuple[int, int]]:
    """Character spans of the whitespace-separated words of ``text``."""
    spans, start = [], None
    for i, ch in enumerate(text):
        if ch.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


START, CONTINUATION, CONTROL, UNKNOWN = "start", "continuation", "control", "unknown"


@dataclass
class VocabView:
    """Per-id view of a fairseq dictionary under its tokenizer.

    ``words[i]`` is the surface word of entry ``i`` when the entry starts a word and is purely
    alphabetic (a candidate whole word), else ``None``; ``continuation[i]`` is True when entry
    ``i`` continues the previous token's word; ``unknown`` counts entries (after the specials)
    the tokenizer does not know."""

    symbols: List[str]
    words: List[Optional[str]]
    continuation: List[bool]
    tokenizer: str
    unknown: int = 0


class Tokenizer(abc.ABC):
    """Base class; see the module docstring. Subclasses implement ``pieces``, ``classify`` and
    the word-level encoding ``word_pieces``."""

    kind = ""

    def __init__(self, spec: TokenizerSpec):
        self.spec = spec

    # ---- text -> dict.txt symbols ----------------------------------------------------------
    @abc.abstractmethod
    def pieces(self, text: str) -> List[str]:
        """``text`` as dict.txt symbols."""

    def encode_lines(self, texts: Sequence[str]) -> List[str]:
        """Each text as its symbols joined by single spaces (fairseq-preprocess input)."""
        return [" ".join(self.pieces(t)) for t in texts]

    def __call__(self, texts: Sequence[str]) -> List[str]:
        return self.encode_lines(texts)

    def encode_ids(self, text: str, dictionary) -> List[int]:
        """fairseq ids of ``text`` in ``dictionary`` (symbols it lacks become ``<unk>``)."""
        return [dictionary.index(p) for p in self.pieces(text)]

    def word_pieces(self, word: str) -> List[str]:
        """Symbols of one whitespace-free word, encoded as a word that follows a space."""
        return self.pieces(word)

    def words(self, text: str) -> Tuple[List[Tuple[int, int]], List[List[str]]]:
        """(character span of each word, the word's symbols): the words are what the tokenizer
        treats as words (whitespace-separated here; WordPiece also splits punctuation off), so a
        span of symbols maps back to a substring of ``text`` exactly."""
        spans = split_words(text)
        return spans, [self.word_pieces(text[s:e]) for s, e in spans]

    # ---- dict.txt symbols -> word structure --------------------------------------------------
    @abc.abstractmethod
    def classify(self, symbol: str) -> Tuple[str, Optional[str]]:
        """(``START``/``CONTINUATION``/``CONTROL``/``UNKNOWN``, surface word of a word start)."""

    def starts_word(self, symbol: str) -> bool:
        """Whether ``symbol`` begins a word (control and unknown entries count as starts, as in
        fairseq's whole-word masking)."""
        return self.classify(symbol)[0] != CONTINUATION

    def vocab_view(
        self, symbols: Sequence[str], nspecial: int, where: str = "dict.txt"
    ) -> VocabView:
        """Classify every entry of a dictionary; more than half unknown entries means the
        dictionary was made by another tokenizer (:class:`TokenizerError`)."""
        symbols = list(symbols)
        words: List[Optional[str]] = [None] * len(symbols)
        cont = [False] * len(symbols)
        unknown = 0
        for i in range(nspecial, len(symbols)):
            what, surface = self.classify(symbols[i])
            if what == UNKNOWN:
                unknown += 1
            elif what == CONTINUATION:
                cont[i] = True
            elif what == START and surface is not None and is_word(surface):
                words[i] = surface
        n = len(symbols) - nspecial
        if n and unknown > 0.5 * n:
            raise TokenizerError(
                f"{unknown} of {n} entries of {where} are not {self.describe()}: the "
                f"dictionary was not produced by this {self.kind} model"
            )
        return VocabView(symbols, words, cont, self.kind, unknown)

    # ---- identity ------------------------------------------------------------------------
    def describe(self) -> str:
        files = ", ".join(self.spec.files().values())
        return f"entries of {files}" if files else f"{self.kind} entries"

    def file_fingerprints(self) -> Dict[str, str]:
        """{spec field: sha256 of what the file says (:func:`content_digest`)} for the files given."""
        return {attr: content_digest(path) for attr, path in sorted(self.spec.files().items())}

    def fingerprint(self) -> str:
        """sha256 over the kind, the files' contents (and WordPiece's lower-casing)."""
        h = hashlib.sha256(self.kind.encode())
        for attr, digest in self.file_fingerprints().items():
            h.update(f"\0{attr}={digest}".encode())
        if self.kind == "wordpiece":
            h.update(f"\0lowercase={self.lowercase}".encode())
        return h.hexdigest()

    def bpe_args(self) -> argparse.Namespace:
        """What ``fairseq.data.encoders.build_bpe`` builds this tokenizer's word-start test from
        (``bpe=None``: every symbol is a word, as for whitespace tokens)."""
        return argparse.Namespace(bpe=None)


class SentencePieceTokenizer(Tokenizer):
    kind = "sentencepiece"

    def __init__(self, spec: TokenizerSpec):
        super().__init__(spec)
        import sentencepiece as spm

        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(spec.spm_model))
        except (OSError, RuntimeError) as e:
            raise TokenizerError(
                f"{spec.flag('spm-model')} {spec.spm_model} is not a sentencepiece model ({e})"
            ) from None
        self._unk_piece = self.sp.id_to_piece(self.sp.unk_id())

    def pieces(self, text: str) -> List[str]:
        return self.sp.encode(text, out_type=str)

    def encode_lines(self, texts: Sequence[str]) -> List[str]:
        return [" ".join(p) for p in self.sp.encode(list(texts), out_type=str)] if texts else []

    def classify(self, symbol: str):
        pid = self.sp.piece_to_id(symbol)
        if pid == self.sp.unk_id() and symbol != self._unk_piece:
            return UNKNOWN, None
        if self.sp.is_control(pid) or self.sp.is_unknown(pid):
            return CONTROL, None
        if symbol.startswith(SP_SPACE):
            return START, symbol[1:]
        return CONTINUATION, None

    def bpe_args(self):
        return argparse.Namespace(
            bpe="sentencepiece",
            sentencepiece_model=str(self.spec.spm_model),
            sentencepiece_enable_sampling=False,
            sentencepiece_alpha=None,
        )


class GPT2Tokenizer(Tokenizer):
    """GPT-2 byte-level BPE; ``dict.txt`` holds BPE ids as decimal strings."""

    kind = "gpt2"

    def __init__(self, spec: TokenizerSpec):
        super().__init__(spec)
        try:
            with open(spec.gpt2_encoder_json, encoding="utf-8") as f:
                self.encoder = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TokenizerError(
                f"{spec.flag('gpt2-encoder-json')} {spec.gpt2_encoder_json} is not GPT-2's "
                f"encoder.json ({e})"
            ) from None
        if not isinstance(self.encoder, dict):
            raise TokenizerError(
                f"{spec.flag('gpt2-encoder-json')} {spec.gpt2_encoder_json} is not GPT-2's encoder.json"
            )
        self.decoder = {v: k for k, v in self.encoder.items()}
        self._bpe = None

    @property
    def bpe(self):
        """fairseq's GPT-2 encoder (needs vocab.bpe; the dictionary view does not)."""
        if self._bpe is None:
            from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

            if not self.spec.gpt2_vocab_bpe or not os.path.isfile(self.spec.gpt2_vocab_bpe):
                raise TokenizerError(
                    f"encoding text with --tokenizer gpt2 needs {self.spec.flag('gpt2-vocab-bpe')} "
                    f"FILE (vocab.bpe of the GPT-2 BPE); got {self.spec.gpt2_vocab_bpe!r}"
                )
            self._bpe = get_encoder(str(self.spec.gpt2_encoder_json), str(self.spec.gpt2_vocab_bpe))
        return self._bpe

    def pieces(self, text: str) -> List[str]:
        return [str(i) for i in self.bpe.encode(text)]

    def word_pieces(self, word: str) -> List[str]:
        # GPT-2 marks a word start with the space before it
        return self.pieces(" " + word)

    def classify(self, symbol: str):
        tok = self.decoder.get(int(symbol)) if symbol.isdigit() else None
        if tok is None:
            return UNKNOWN, None
        if tok.startswith("<|") and tok.endswith("|>"):
            return CONTROL, None
        if tok.startswith(GPT2_SPACE):
            return START, tok[1:]
        return CONTINUATION, None

    def bpe_args(self):
        return argparse.Namespace(
            bpe="gpt2",
            gpt2_encoder_json=str(self.spec.gpt2_encoder_json),
            gpt2_vocab_bpe=str(self.spec.gpt2_vocab_bpe),
        )


class WordPieceTokenizer(Tokenizer):
    """BERT's WordPiece through HF ``tokenizers`` (BERT's normalizer and pre-tokenizer: split on
    whitespace and punctuation, lower-case and strip accents when ``lowercase``)."""

    kind = "wordpiece"

    def __init__(self, spec: TokenizerSpec):
        super().__init__(spec)
        from tokenizers import BertWordPieceTokenizer

        self.vocab, configured = read_wordpiece_vocab(spec.vocab, spec.flag("vocab"))
        if spec.lowercase is not None:
            self.lowercase = spec.lowercase
        elif configured is not None:
            self.lowercase = configured
        else:
            self.lowercase = uncased(self.vocab)
        self.entries = set(self.vocab)
        self.tok = BertWordPieceTokenizer(
            {t: i for i, t in enumerate(self.vocab)}, lowercase=self.lowercase
        )

    def _symbols(self, tokens: List[str]) -> List[str]:
        return [TO_FAIRSEQ.get(t, t) for t in tokens]

    def pieces(self, text: str) -> List[str]:
        return self._symbols(self.tok.encode(text, add_special_tokens=False).tokens)

    def encode_lines(self, texts: Sequence[str]) -> List[str]:
        encs = self.tok.encode_batch(list(texts), add_special_tokens=False) if texts else []
        return [" ".join(self._symbols(e.tokens)) for e in encs]

    def words(self, text: str):
        enc = self.tok.encode(text, add_special_tokens=False)
        spans: List[Tuple[int, int]] = []
        pieces: List[List[str]] = []
        last = None
        for tok, wid, (s, e) in zip(self._symbols(enc.tokens), enc.word_ids, enc.offsets):
            if wid != last or wid is None:
                spans.append((s, e))
                pieces.append([])
                last = wid
            spans[-1] = (spans[-1][0], e)
            pieces[-1].append(tok)
        return spans, pieces

    def classify(self, symbol: str):
        hf = FROM_FAIRSEQ.get(symbol, symbol)
        if hf not in self.entries:
            return UNKNOWN, None
        if hf in TO_FAIRSEQ:
            return CONTROL, None
        if symbol.startswith(WORDPIECE_CONT):
            return CONTINUATION, None
        return START, symbol

    def bpe_args(self):
        return argparse.Namespace(
            bpe="wordpiece",
            wordpiece_vocab=str(self.spec.vocab),
            wordpiece_lowercase="yes" if self.lowercase else "no",
        )


class WhitespaceTokenizer(Tokenizer):
    """Whitespace-separated words; every dictionary entry is a word."""

    kind = "whitespace"

    def pieces(self, text: str) -> List[str]:
        return text.split()

    def classify(self, symbol: str):
        return START, symbol


CLASSES = {
    c.kind: c
    for c in (SentencePieceTokenizer, GPT2Tokenizer, WordPieceTokenizer, WhitespaceTokenizer)
}


def build_tokenizer(spec: TokenizerSpec, view_only: bool = False) -> Tokenizer:
    """Check ``spec`` and build its tokenizer (``view_only``: only the files the dictionary view
    needs must be given, e.g. GPT-2's encoder.json without vocab.bpe)."""
    spec.check(view_only=view_only)
    return CLASSES[spec.kind](spec)


def load_dictionary_view(dict_path, tokenizer: Tokenizer) -> VocabView:
    """Load ``dict.txt`` as fairseq does and classify each entry with ``tokenizer``."""
    from fairseq.data import Dictionary

    dict_path = Path(dict_path)
    if not dict_path.is_file():
        raise TokenizerError(
            f"dictionary {dict_path} not found: pass the dict.txt that fairseq-preprocess "
            "wrote into your data-bin directory"
        )
    d = Dictionary.load(str(dict_path))
    return tokenizer.vocab_view(d.symbols, d.nspecial, str(dict_path))


def tokenizer_from_args(args: argparse.Namespace, view_only: bool = False) -> Tokenizer:
    """The tokenizer the shared flags describe (raises :class:`TokenizerError`)."""
    return build_tokenizer(TokenizerSpec.from_args(args), view_only=view_only)
