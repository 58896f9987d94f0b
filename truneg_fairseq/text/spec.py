"""What a tokenizer is: its kind and files (:class:`TokenizerSpec`), the one flag set that
names them (scripts: :func:`add_tokenizer_args`; fairseq configs: :func:`tokenizer_fields`, the
same fields under the owner's prefix), and the constants every tokenizer module shares."""

import argparse
import os
from dataclasses import dataclass, field, make_dataclass
from typing import Dict, Optional, Sequence

from truneg_fairseq.errors import (
    TokenizerError,  # noqa: F401  (defined in the one place of the errors)
)

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
    "sentencepiece": (
        ("spm_model", "spm-model", "the sentencepiece .model that tokenized the corpus"),
    ),
    "gpt2": (
        ("gpt2_encoder_json", "gpt2-encoder-json", "encoder.json of the GPT-2 BPE"),
        ("gpt2_vocab_bpe", "gpt2-vocab-bpe", "vocab.bpe of the GPT-2 BPE"),
    ),
    "wordpiece": (("vocab", "vocab", "the WordPiece vocab.txt (or a WordPiece tokenizer.json)"),),
    "whitespace": (),
}
VIEW_FILES = {
    "sentencepiece": ("spm_model",),
    "gpt2": ("gpt2_encoder_json",),
    "wordpiece": ("vocab",),
    "whitespace": (),
}


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
        return cls(
            args.tokenizer,
            args.spm_model,
            args.gpt2_encoder_json,
            args.gpt2_vocab_bpe,
            args.vocab,
            None if lower in (None, "auto") else lower == "yes",
        )

    @classmethod
    def from_config(cls, cfg, prefix: str) -> Optional["TokenizerSpec"]:
        """From a task config's ``{prefix}_tokenizer``, ``{prefix}_spm_model``, ... fields (None
        when ``{prefix}_tokenizer`` is unset)."""
        kind = getattr(cfg, f"{prefix}_tokenizer", None)
        if kind is None:
            return None
        get = lambda name: getattr(cfg, f"{prefix}_{name}", None)  # noqa: E731
        lower = get("lowercase")
        return cls(
            str(kind),
            get("spm_model"),
            get("gpt2_encoder_json"),
            get("gpt2_vocab_bpe"),
            get("vocab"),
            None if lower in (None, "auto") else lower == "yes",
            flag_prefix=f"--{prefix.replace('_', '-')}-",
        )

    def check(self, view_only: bool = False) -> None:
        """Raise unless ``kind`` is known and its files exist (``view_only``: only the files the
        dictionary view needs must be given)."""
        if self.kind not in KINDS:
            raise TokenizerError(
                f"{self.flag('tokenizer')} {self.kind!r} is not one of {', '.join(KINDS)}"
            )
        for attr, flag, what in FILES[self.kind]:
            path = getattr(self, attr)
            if not path and (not view_only or attr in VIEW_FILES[self.kind]):
                raise TokenizerError(
                    f"{self.flag('tokenizer')} {self.kind} needs {self.flag(flag)} FILE ({what})"
                )
            if path and not os.path.isfile(path):
                raise TokenizerError(f"{self.flag(flag)} {path} not found ({what})")

    def files(self) -> Dict[str, str]:
        """{spec field: path} of the files given for this kind."""
        return {
            attr: str(getattr(self, attr))
            for attr, _, _ in FILES.get(self.kind, ())
            if getattr(self, attr)
        }


def add_tokenizer_args(
    parser: argparse.ArgumentParser,
    required: bool = True,
    default: Optional[str] = None,
    kinds: Sequence[str] = KINDS,
) -> argparse._ArgumentGroup:
    """Add the shared tokenizer flags to a script's parser."""
    g = parser.add_argument_group("tokenizer (the one that produced dict.txt)")
    g.add_argument(
        "--tokenizer",
        choices=list(kinds),
        required=required and default is None,
        default=default,
        help="sentencepiece pieces (▁ starts a word), GPT-2 byte-level BPE ids (Ġ starts a word), "
        "WordPiece entries (## continues a word) or whitespace-separated words"
        + (f" (default: {default})" if default else ""),
    )
    g.add_argument("--spm-model", help="sentencepiece .model (--tokenizer sentencepiece)")
    g.add_argument("--gpt2-encoder-json", help="GPT-2 BPE encoder.json (--tokenizer gpt2)")
    g.add_argument("--gpt2-vocab-bpe", help="GPT-2 BPE vocab.bpe (--tokenizer gpt2)")
    g.add_argument(
        "--vocab", help="WordPiece vocab.txt or WordPiece tokenizer.json (--tokenizer wordpiece)"
    )
    g.add_argument(
        "--lowercase",
        choices=["auto", "yes", "no"],
        default="auto",
        help="--tokenizer wordpiece: lower-case (and strip accents) before WordPiece; auto: as "
        "do_lower_case in tokenizer_config.json/config.json beside the vocabulary says, else "
        "lower-case when the vocabulary has no upper-case entries (default: auto)",
    )
    return g


# ---------------------------------------------------------------------------------------------
# WordPiece vocabularies
# ---------------------------------------------------------------------------------------------


# (name, type, default, help) of each config field; ``{what}`` is the field owner's purpose. The
# choices ("kind": KINDS, "choice": LOWERCASE) become fairseq ChoiceEnums in tokenizer_fields, so
# that this module, and the commands' flags (add_tokenizer_args), need no fairseq
LOWERCASE = ("auto", "yes", "no")
_FIELDS = (
    (
        "tokenizer",
        "kind",
        None,
        "tokenizer of the data{what}: sentencepiece, gpt2, wordpiece or whitespace",
    ),
    ("spm_model", Optional[str], None, "sentencepiece .model{what}"),
    ("gpt2_encoder_json", Optional[str], None, "GPT-2 BPE encoder.json{what}"),
    ("gpt2_vocab_bpe", Optional[str], None, "GPT-2 BPE vocab.bpe{what}"),
    ("vocab", Optional[str], None, "WordPiece vocab.txt or WordPiece tokenizer.json{what}"),
    (
        "lowercase",
        "choice",
        "auto",
        "WordPiece: lower-case (and strip accents) first; auto: as the vocabulary's config says",
    ),
)


def tokenizer_fields(
    prefix: str,
    what: str = "",
    default: Optional[str] = None,
    names: Sequence[str] = tuple(f[0] for f in _FIELDS),
) -> type:
    """The tokenizer flag set as fairseq config fields ``{prefix}_tokenizer``,
    ``{prefix}_spm_model``, ... (``--{prefix}-tokenizer`` on the command line): a dataclass for
    a task's (or BPE's) config to inherit, read back by :meth:`TokenizerSpec.from_config`.
    ``default`` is the kind when none is given (None: the data directory's record decides)."""
    from fairseq.dataclass import ChoiceEnum, FairseqDataclass

    kind_type = ChoiceEnum(list(KINDS))
    fields = []
    for name, typ, value, help_text in _FIELDS:
        if name not in names:
            continue
        if typ == "choice":
            typ = ChoiceEnum(list(LOWERCASE))
        if name == "tokenizer":
            typ, value = (kind_type if default else Optional[kind_type]), default
        fields.append(
            (
                f"{prefix}_{name}",
                typ,
                field(default=value, metadata={"help": help_text.format(what=what)}),
            )
        )
    return make_dataclass(
        f"{prefix.title().replace('_', '')}TokenizerFields", fields, bases=(FairseqDataclass,)
    )
