"""The one tokenizer layer: sentencepiece, GPT-2 byte-level BPE, WordPiece and whitespace.

Every task and script that turns text into ``dict.txt`` symbols, or asks which symbols start a
word, goes through :func:`build_tokenizer`. A :class:`Tokenizer` offers

* ``pieces(text)`` / ``encode_lines(texts)``: text -> symbols as they appear in ``dict.txt``
  (sentencepiece pieces, GPT-2 BPE ids as decimal strings, WordPiece entries with BERT's
  ``[CLS] [SEP] [PAD] [UNK] [MASK]`` written as fairseq's ``<s> </s> <pad> <unk> <mask>``,
  whitespace-separated words); ``encode_ids(text, dictionary)``: the same as fairseq ids;
* ``classify(symbol)``: whether a ``dict.txt`` symbol starts a word (sentencepiece ``▁``,
  GPT-2 ``Ġ``, WordPiece: anything but ``##``), continues one, or is a control entry, and the
  surface word of a word-start; :meth:`Tokenizer.vocab_view` applies it to a whole dictionary
  (what the synonym tables need);
* ``words(text)``: the words of a text with their character spans and pieces (SQuAD offsets);
* ``fingerprint()``: sha256 over the tokenizer's kind and files, recorded next to ``dict.txt``
  by ``prepare_corpus.py`` (:func:`write_record`) and checked by ``build_synonym_table.py``;
* ``bpe_args()``: the description fairseq's BPE registry builds a word-start test from
  (``get_whole_word_mask``: fairseq's ``sentencepiece`` and ``gpt2`` BPEs, and the ``wordpiece``
  BPE registered here), for ``--mask-whole-words``.

Scripts share one flag set (:func:`add_tokenizer_args`: ``--tokenizer``, ``--spm-model``,
``--gpt2-encoder-json``, ``--gpt2-vocab-bpe``, ``--vocab``); task configs carry the same fields
under their owner's prefix (``squad_tokenizer``, ``squad_spm_model``, ..., see
:meth:`TokenizerSpec.from_config`).

WordPiece vocabularies (BERT's ``vocab.txt``, or a WordPiece ``tokenizer.json``) are read by
:func:`read_wordpiece_vocab`; :func:`wordpiece_dict_lines` gives the ``dict.txt`` that keeps a
model's vocabulary size and order (fairseq's four specials first, ``<mask>`` added last by the
masked-LM tasks, every other entry in vocabulary id order).
"""

import abc
import argparse
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq.data.encoders import register_bpe
from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.io_utils import atomic_open

logger = logging.getLogger(__name__)

KINDS = ("sentencepiece", "gpt2", "wordpiece", "whitespace")
SP_SPACE = "\u2581"  # sentencepiece word-start mark
GPT2_SPACE = "\u0120"  # GPT-2 byte-level encoding of a leading space ("Ġ")
WORDPIECE_CONT = "##"  # WordPiece continuation mark
# BERT's special entries as fairseq writes them; fairseq's Dictionary puts <s> <pad> </s> <unk>
# first and the masked-LM tasks append <mask>, so these five are not lines of dict.txt
BERT_SPECIALS = (("[CLS]", "<s>"), ("[PAD]", "<pad>"), ("[SEP]", "</s>"), ("[UNK]", "<unk>"))
BERT_MASK = ("[MASK]", "<mask>")
TO_FAIRSEQ = dict(BERT_SPECIALS + (BERT_MASK,))
FROM_FAIRSEQ = {fs: hf for hf, fs in TO_FAIRSEQ.items()}
RECORD_NAME = "tokenizer_fingerprint.json"  # written next to dict.txt
RECORD_VERSION = 1

# the files each kind needs: (spec field, script flag, what it is); the first ones are needed to
# encode text, ``VIEW_FILES`` lists those the dictionary view needs
FILES = {
    "sentencepiece": (("spm_model", "spm-model", "the sentencepiece .model that tokenized the corpus"),),
    "gpt2": (("gpt2_encoder_json", "gpt2-encoder-json", "encoder.json of the GPT-2 BPE"),
             ("gpt2_vocab_bpe", "gpt2-vocab-bpe", "vocab.bpe of the GPT-2 BPE")),
    "wordpiece": (("vocab", "vocab", "the WordPiece vocab.txt (or a WordPiece tokenizer.json)"),),
    "whitespace": (),
}
VIEW_FILES = {
    "sentencepiece": ("spm_model",), "gpt2": ("gpt2_encoder_json",), "wordpiece": ("vocab",), "whitespace": (),
}


class TokenizerError(CorpusError):
    """A tokenizer that cannot be built or does not fit its data; the message says what to do."""


# ---------------------------------------------------------------------------------------------
# the description of a tokenizer, from script flags or a task config
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenizerSpec:
    """Which tokenizer and its files. ``lowercase`` is WordPiece's (None: as the vocabulary's
    config says). ``flag_prefix`` names the flags in messages (``--`` for scripts,
    ``--squad-`` for ``--task squad``, ...)."""

    kind: str
    spm_model: Optional[str] = None
    gpt2_encoder_json: Optional[str] = None
    gpt2_vocab_bpe: Optional[str] = None
    vocab: Optional[str] = None
    lowercase: Optional[bool] = None
    flag_prefix: str = field(default="--", compare=False)

    def flag(self, name: str) -> str:
        return f"{self.flag_prefix}{name}"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "TokenizerSpec":
        """From the flags :func:`add_tokenizer_args` added."""
        lower = getattr(args, "lowercase", None)
        return cls(args.tokenizer, args.spm_model, args.gpt2_encoder_json, args.gpt2_vocab_bpe, args.vocab,
                   None if lower in (None, "auto") else lower == "yes")

    @classmethod
    def from_config(cls, cfg, prefix: str) -> Optional["TokenizerSpec"]:
        """From a task config's ``{prefix}_tokenizer``, ``{prefix}_spm_model``, ... fields (None
        when ``{prefix}_tokenizer`` is unset)."""
        kind = getattr(cfg, f"{prefix}_tokenizer", None)
        if kind is None:
            return None
        get = lambda name: getattr(cfg, f"{prefix}_{name}", None)  # noqa: E731
        lower = get("lowercase")
        return cls(str(kind), get("spm_model"), get("gpt2_encoder_json"), get("gpt2_vocab_bpe"), get("vocab"),
                   None if lower in (None, "auto") else lower == "yes", flag_prefix=f"--{prefix.replace('_', '-')}-")

    def check(self, view_only: bool = False) -> None:
        """Raise unless ``kind`` is known and its files exist (``view_only``: only the files the
        dictionary view needs must be given)."""
        if self.kind not in KINDS:
            raise TokenizerError(f"{self.flag('tokenizer')} {self.kind!r} is not one of {', '.join(KINDS)}")
        for attr, flag, what in FILES[self.kind]:
            path = getattr(self, attr)
            if not path and (not view_only or attr in VIEW_FILES[self.kind]):
                raise TokenizerError(f"{self.flag('tokenizer')} {self.kind} needs {self.flag(flag)} FILE ({what})")
            if path and not os.path.isfile(path):
                raise TokenizerError(f"{self.flag(flag)} {path} not found ({what})")

    def files(self) -> Dict[str, str]:
        """{spec field: path} of the files given for this kind."""
        return {attr: str(getattr(self, attr)) for attr, _, _ in FILES.get(self.kind, ()) if getattr(self, attr)}


def add_tokenizer_args(parser: argparse.ArgumentParser, required: bool = True, default: Optional[str] = None,
                       kinds: Sequence[str] = KINDS) -> argparse._ArgumentGroup:
    """Add the shared tokenizer flags to a script's parser."""
    g = parser.add_argument_group("tokenizer (the one that produced dict.txt)")
    g.add_argument("--tokenizer", choices=list(kinds), required=required and default is None, default=default,
                   help="sentencepiece pieces (▁ starts a word), GPT-2 byte-level BPE ids (Ġ starts a word), "
                        "WordPiece entries (## continues a word) or whitespace-separated words"
                        + (f" (default: {default})" if default else ""))
    g.add_argument("--spm-model", help="sentencepiece .model (--tokenizer sentencepiece)")
    g.add_argument("--gpt2-encoder-json", help="GPT-2 BPE encoder.json (--tokenizer gpt2)")
    g.add_argument("--gpt2-vocab-bpe", help="GPT-2 BPE vocab.bpe (--tokenizer gpt2)")
    g.add_argument("--vocab", help="WordPiece vocab.txt or WordPiece tokenizer.json (--tokenizer wordpiece)")
    g.add_argument("--lowercase", choices=["auto", "yes", "no"], default="auto",
                   help="--tokenizer wordpiece: lower-case (and strip accents) before WordPiece; auto: as "
                        "do_lower_case in tokenizer_config.json/config.json beside the vocabulary says, else "
                        "lower-case when the vocabulary has no upper-case entries (default: auto)")
    return g


def tokenizer_from_args(args: argparse.Namespace, view_only: bool = False) -> "Tokenizer":
    """The tokenizer the shared flags describe (raises :class:`TokenizerError`)."""
    return build_tokenizer(TokenizerSpec.from_args(args), view_only=view_only)


# ---------------------------------------------------------------------------------------------
# WordPiece vocabularies
# ---------------------------------------------------------------------------------------------


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
        hint = " (a sentencepiece .model? use --tokenizer sentencepiece --spm-model)" if path.suffix == ".model" else ""
        raise _not_wordpiece(path, f"not UTF-8 text{hint}", flag) from None
    lowercase = _config_lowercase(path.parent)
    if text.lstrip().startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise _not_wordpiece(path, f"JSON that cannot be read ({e})", flag) from None
        model = spec.get("model") if isinstance(spec, dict) else None
        if not isinstance(model, dict):
            raise _not_wordpiece(path, "a JSON file without a tokenizer model (GPT-2's encoder.json? use "
                                       "--tokenizer gpt2 --gpt2-encoder-json)", flag)
        if model.get("type") != "WordPiece":
            raise _not_wordpiece(path, f"tokenizer.json of a {model.get('type')} tokenizer", flag)
        ids = model.get("vocab") or {}
        vocab: List[Optional[str]] = [None] * len(ids)
        for tok, i in ids.items():
            if not isinstance(i, int) or not 0 <= i < len(ids) or vocab[i] is not None:
                raise _not_wordpiece(path, f"its ids are not 0..{len(ids) - 1} without gaps", flag)
            vocab[i] = tok
        norm = spec.get("normalizer") or {}
        if lowercase is None and isinstance(norm, dict) and "lowercase" in norm:
            lowercase = bool(norm["lowercase"])
    else:
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
    seen: Dict[str, int] = {}
    for i, tok in enumerate(vocab):
        if tok in seen:
            raise _not_wordpiece(path, f"entry {tok!r} appears twice (lines {seen[tok] + 1} and {i + 1})", flag)
        seen[tok] = i
    missing = [hf for hf in TO_FAIRSEQ if hf not in seen]
    if missing:
        raise _not_wordpiece(path, f"it lacks BERT's special entries {' '.join(missing)}", flag)
    clash = [fs for fs in TO_FAIRSEQ.values() if fs in seen]
    if clash:
        raise _not_wordpiece(path, f"it holds fairseq's own symbols {' '.join(clash)}, which cannot be mapped", flag)
    return list(vocab), lowercase


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
    vocab, _ = read_wordpiece_vocab(vocab_path)
    return [f"{vocab[i]} 1" for i in wordpiece_row_order(vocab)[len(BERT_SPECIALS):-1]]


# ---------------------------------------------------------------------------------------------
# the tokenizers
# ---------------------------------------------------------------------------------------------


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

    def vocab_view(self, symbols: Sequence[str], nspecial: int, where: str = "dict.txt") -> VocabView:
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
            raise TokenizerError(f"{unknown} of {n} entries of {where} are not {self.describe()}: the "
                                 f"dictionary was not produced by this {self.kind} model")
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
        return argparse.Namespace(bpe="sentencepiece", sentencepiece_model=str(self.spec.spm_model),
                                  sentencepiece_enable_sampling=False, sentencepiece_alpha=None)


class GPT2Tokenizer(Tokenizer):
    """GPT-2 byte-level BPE; ``dict.txt`` holds BPE ids as decimal strings."""

    kind = "gpt2"

    def __init__(self, spec: TokenizerSpec):
        super().__init__(spec)
        try:
            with open(spec.gpt2_encoder_json, encoding="utf-8") as f:
                self.encoder = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TokenizerError(f"{spec.flag('gpt2-encoder-json')} {spec.gpt2_encoder_json} is not GPT-2's "
                                 f"encoder.json ({e})") from None
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
                raise TokenizerError(f"encoding text with --tokenizer gpt2 needs {self.spec.flag('gpt2-vocab-bpe')} "
                                     f"FILE (vocab.bpe of the GPT-2 BPE); got {self.spec.gpt2_vocab_bpe!r}")
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
        return argparse.Namespace(bpe="gpt2", gpt2_encoder_json=str(self.spec.gpt2_encoder_json),
                                  gpt2_vocab_bpe=str(self.spec.gpt2_vocab_bpe))


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
        self.tok = BertWordPieceTokenizer({t: i for i, t in enumerate(self.vocab)}, lowercase=self.lowercase)

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
        return argparse.Namespace(bpe="wordpiece", wordpiece_vocab=str(self.spec.vocab),
                                  wordpiece_lowercase="yes" if self.lowercase else "no")


class WhitespaceTokenizer(Tokenizer):
    """Whitespace-separated words; every dictionary entry is a word."""

    kind = "whitespace"

    def pieces(self, text: str) -> List[str]:
        return text.split()

    def classify(self, symbol: str):
        return START, symbol


CLASSES = {c.kind: c for c in (SentencePieceTokenizer, GPT2Tokenizer, WordPieceTokenizer, WhitespaceTokenizer)}


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
        raise TokenizerError(f"dictionary {dict_path} not found: pass the dict.txt that fairseq-preprocess "
                             "wrote into your data-bin directory")
    d = Dictionary.load(str(dict_path))
    return tokenizer.vocab_view(d.symbols, d.nspecial, str(dict_path))


# ---------------------------------------------------------------------------------------------
# the record next to dict.txt
# ---------------------------------------------------------------------------------------------


def content_digest(path) -> str:
    """sha256 of what a tokenizer file says, not of its bytes: a sentencepiece model's pieces,
    scores, types and normalisation rules (its trainer section, which records the input paths
    and the training process, is left out, so two identical trainings agree); a JSON file's
    parsed content; a text file's lines without their line endings (a CRLF copy agrees)."""
    path = Path(path)
    h = hashlib.sha256()
    if path.suffix == ".model":
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        try:
            proto.ParseFromString(path.read_bytes())
        except Exception:  # not a model proto: its bytes identify it
            h.update(path.read_bytes())
            return h.hexdigest()
        for piece in proto.pieces:
            h.update(f"{piece.piece}\t{piece.score!r}\t{piece.type}\n".encode("utf-8"))
        h.update(proto.normalizer_spec.SerializeToString(deterministic=True))
        h.update(proto.denormalizer_spec.SerializeToString(deterministic=True))
        return h.hexdigest()
    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            h.update(json.dumps(json.loads(data.decode("utf-8")), sort_keys=True, ensure_ascii=False).encode("utf-8"))
            return h.hexdigest()
        except (ValueError, UnicodeDecodeError):
            pass
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    while lines and not lines[-1]:
        lines.pop()
    h.update(b"\n".join(lines))
    return h.hexdigest()


def _byte_digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_record(data_dir, tokenizer: Tokenizer, moved_from: Optional[str] = None, moved_to: Optional[str] = None) -> Path:
    """Write ``DATA/tokenizer_fingerprint.json`` (atomically): the tokenizer's kind, its files
    (absolute paths and the sha256 of their contents, :func:`content_digest`), lower-casing and
    fingerprint, so later steps can check they use
    the tokenizer that made ``DATA/dict.txt``, and whole-word masking can find it. Files written
    in a staging directory ``moved_from`` are recorded at their final place under ``moved_to``."""
    digests = tokenizer.file_fingerprints()

    def final(path: str) -> str:
        path = os.path.abspath(path)
        if moved_from and os.path.commonpath([path, os.path.abspath(moved_from)]) == os.path.abspath(moved_from):
            return os.path.join(os.path.abspath(moved_to), os.path.relpath(path, moved_from))
        return path

    rec = {"format_version": RECORD_VERSION, "tokenizer": tokenizer.kind, "fingerprint": tokenizer.fingerprint(),
           "files": {k: {"path": final(v), "sha256": digests[k], "digest": "content"}
                     for k, v in tokenizer.spec.files().items()}}
    if tokenizer.kind == "wordpiece":
        rec["lowercase"] = tokenizer.lowercase
    path = Path(data_dir) / RECORD_NAME
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def read_record(data_dir) -> Optional[dict]:
    """The record of ``data_dir`` (None when it has none)."""
    path = Path(data_dir) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerError(f"{path} cannot be read ({e}); delete it or prepare the data again") from None
    ok = (isinstance(rec, dict) and rec.get("format_version") == RECORD_VERSION and rec.get("tokenizer") in KINDS
          and isinstance(rec.get("files"), dict) and all(isinstance(f, dict) and "path" in f and "sha256" in f
                                                         for f in rec["files"].values()))
    if not ok:
        raise TokenizerError(f"{path} is not a tokenizer record written by prepare_corpus.py; delete it or "
                             "prepare the data again")
    return rec


def spec_from_record(data_dir, flag_prefix: str = "--") -> Optional[TokenizerSpec]:
    """The tokenizer recorded for ``data_dir`` (None when there is no record)."""
    rec = read_record(data_dir)
    if rec is None:
        return None
    files = {k: f["path"] for k, f in rec["files"].items()}
    return TokenizerSpec(rec["tokenizer"], files.get("spm_model"), files.get("gpt2_encoder_json"),
                         files.get("gpt2_vocab_bpe"), files.get("vocab"), rec.get("lowercase"), flag_prefix)


def check_record(dict_path, tokenizer: Tokenizer) -> None:
    """Raise unless the record next to ``dict_path`` (if any) names this tokenizer: the same
    kind, the same bytes for every file both name, the same WordPiece lower-casing."""
    folder = Path(dict_path).parent
    rec = read_record(folder)
    if rec is None:
        return
    record = folder / RECORD_NAME
    recorded = ", ".join(f["path"] for f in rec["files"].values()) or "no file"
    fix = (f"; pass the tokenizer files that prepared {dict_path} ({recorded}), or prepare the data again "
           "with these (scripts/prepare_corpus.py)")
    if rec["tokenizer"] != tokenizer.kind:
        raise TokenizerError(f"{dict_path} was made with --tokenizer {rec['tokenizer']} (as {record} says), "
                             f"not --tokenizer {tokenizer.kind}" + fix)
    given = tokenizer.file_fingerprints()
    for attr, digest in given.items():
        want = rec["files"].get(attr)
        if want is not None and want.get("digest") != "content":  # a record of the files' bytes
            digest = _byte_digest(tokenizer.spec.files()[attr])
        if want is not None and want["sha256"] != digest:
            flag = next(fl for a, fl, _ in FILES[tokenizer.kind] if a == attr)
            raise TokenizerError(
                f"{tokenizer.spec.flag(flag)} {tokenizer.spec.files()[attr]} is not the file that made {dict_path}: "
                f"{record} records {want['path']} (sha256 {want['sha256'][:12]}, this one {digest[:12]})" + fix)
    if tokenizer.kind == "wordpiece" and rec.get("lowercase") is not None and rec["lowercase"] != tokenizer.lowercase:
        raise TokenizerError(f"{dict_path} was made with lowercase={rec['lowercase']} (as {record} says), this "
                             f"tokenizer has lowercase={tokenizer.lowercase}: pass --lowercase "
                             f"{'yes' if rec['lowercase'] else 'no'}")


def whole_word_args(data: str, spec: Optional[TokenizerSpec], what: str) -> argparse.Namespace:
    """The ``build_bpe`` description for ``--mask-whole-words`` on ``data``: ``spec`` when given,
    else the tokenizer recorded in ``DATA/tokenizer_fingerprint.json``."""
    if spec is None:
        from fairseq import utils

        first = utils.split_paths(data)[0] if data else ""
        spec = spec_from_record(first) if first else None
        if spec is None:
            raise TokenizerError(
                f"--mask-whole-words needs the tokenizer of the data: {what}, or a {RECORD_NAME} in the data "
                "directory (prepare_corpus.py writes one)"
            )
    return build_tokenizer(spec).bpe_args()


def give_masked_lm_whole_words() -> None:
    """fairseq 0.12's ``masked_lm`` reads ``self.args`` for ``--mask-whole-words`` but no longer
    has it (AttributeError, fairseq issue #3924): give it the data directory's recorded
    tokenizer. A fairseq that has ``args`` again is left alone."""
    from fairseq.tasks.masked_lm import MaskedLMTask

    if hasattr(MaskedLMTask, "args"):
        return

    def args(self):
        return whole_word_args(self.cfg.data, None, "the masked_lm task has no tokenizer flags")

    MaskedLMTask.args = property(args)


# ---------------------------------------------------------------------------------------------
# fairseq's BPE registry: ``--bpe wordpiece`` (word starts for whole-word masking)
# ---------------------------------------------------------------------------------------------


@dataclass
class WordPieceBPEConfig(FairseqDataclass):
    wordpiece_vocab: Optional[str] = field(default=None, metadata={"help": "WordPiece vocab.txt"})
    wordpiece_lowercase: ChoiceEnum(["auto", "yes", "no"]) = field(
        default="auto", metadata={"help": "lower-case before WordPiece (auto: as the vocabulary's config says)"}
    )


@register_bpe("wordpiece", dataclass=WordPieceBPEConfig)
class WordPieceBPE:
    """BERT's WordPiece via HF tokenizers (fairseq's ``bert`` BPE needs transformers'
    BertTokenizer and a download for its default vocabulary)."""

    def __init__(self, cfg):
        lower = str(cfg.wordpiece_lowercase)
        self.tok = build_tokenizer(TokenizerSpec(
            "wordpiece", vocab=cfg.wordpiece_vocab, lowercase=None if lower == "auto" else lower == "yes",
            flag_prefix="--wordpiece-"))

    def encode(self, x: str) -> str:
        return " ".join(self.tok.pieces(x))

    def decode(self, x: str) -> str:
        out = ""
        for p in x.split():
            out += p[len(WORDPIECE_CONT):] if p.startswith(WORDPIECE_CONT) and out else (" " + p if out else p)
        return out

    def is_beginning_of_word(self, x: str) -> bool:
        return self.tok.starts_word(x)
