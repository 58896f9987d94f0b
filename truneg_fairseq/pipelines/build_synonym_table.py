"""Build and save the synonym table of a fairseq dictionary: what ``truneg-build-synonyms``
(``scripts/build_synonym_table.py``) and the study's table step run."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Optional, Tuple

from truneg_fairseq.text import TokenizerSpec

logger = logging.getLogger(__name__)

# the config fields that name input files, with the flag each comes from
_INPUT_FLAGS = {
    "dict": "--dict",
    "spm_model": "--spm-model",
    "gpt2_encoder_json": "--gpt2-encoder-json",
    "gpt2_vocab_bpe": "--gpt2-vocab-bpe",
    "vocab": "--vocab",
    "vectors": "--vectors",
}


@dataclass
class SynonymTableConfig:
    """One table: the dictionary, the tokenizer that made it, where synonyms come from and the
    file written (atomically)."""

    dict: str
    output: str
    tokenizer: TokenizerSpec = field(default_factory=lambda: TokenizerSpec("sentencepiece"))
    source: str = "wordnet"  # or "embedding" (with ``vectors``)
    vectors: Optional[str] = None  # GloVe / word2vec text file
    topk: int = 10  # neighbours per word with the embedding source

    def inputs(self) -> dict:
        """``{flag: path}`` of every input file given."""
        values = {
            "dict": self.dict,
            "vectors": self.vectors,
            "spm_model": self.tokenizer.spm_model,
            "gpt2_encoder_json": self.tokenizer.gpt2_encoder_json,
            "gpt2_vocab_bpe": self.tokenizer.gpt2_vocab_bpe,
            "vocab": self.tokenizer.vocab,
        }
        return {_INPUT_FLAGS[k]: v for k, v in values.items() if v}


def check_output(cfg: SynonymTableConfig) -> None:
    """``output`` replaces its file: naming an input there (say the dictionary) would destroy the
    input with the table built from it, so it is refused before anything is read."""
    from truneg_fairseq.lexicon import SynonymTableError
    from truneg_fairseq.outputs import files_in, refuse_inputs_as_outputs
    from truneg_fairseq.text.spec import RECORD_NAME

    out = os.path.realpath(cfg.output)
    inputs = list(cfg.inputs().items())  # and the tokenizer record beside the dictionary
    inputs += [("--dict", p) for p in files_in(os.path.dirname(cfg.dict or ""), [RECORD_NAME])]
    refuse_inputs_as_outputs({"--output": cfg.output}, inputs, SynonymTableError)
    if os.path.isdir(out):
        raise SynonymTableError(
            f"--output {cfg.output} is a directory: give the table's file name "
            f"(e.g. {os.path.join(cfg.output, 'synonyms.npz')})"
        )


def build_synonym_table(cfg: SynonymTableConfig, wn=None) -> Tuple[object, object]:
    """Check the inputs, build the table and save it to ``cfg.output``; returns (report, view).
    Raises :class:`~truneg_fairseq.lexicon.SynonymTableError`,
    :class:`~truneg_fairseq.text.TokenizerError` or
    :class:`~truneg_fairseq.lexicon.WordNetNotFoundError` with the file and the fix."""
    from truneg_fairseq.lexicon import SynonymTableError, build_table, vocab_view
    from truneg_fairseq.text import build_tokenizer, check_record

    if cfg.source == "embedding" and not cfg.vectors:
        raise SynonymTableError(
            "--source embedding needs --vectors FILE (GloVe or word2vec text format)"
        )
    check_output(cfg)
    tokenizer = build_tokenizer(cfg.tokenizer, view_only=True)
    check_record(cfg.dict, tokenizer)
    view = vocab_view(cfg.dict, tokenizer)
    n_words = sum(w is not None for w in view.words)
    logger.info(
        f"{cfg.dict}: {len(view.symbols)} entries, {n_words} word-start entries of ASCII "
        f"letters, {sum(view.continuation)} continuation pieces"
    )
    table, report = build_table(view, source=cfg.source, vectors=cfg.vectors, topk=cfg.topk, wn=wn)
    table.save(cfg.output)
    return report, view


def command_line(cfg: SynonymTableConfig) -> list:
    """The ``truneg-build-synonyms`` command line that builds the same table."""
    t = cfg.tokenizer
    cmd = ["truneg-build-synonyms", "--dict", cfg.dict, "--tokenizer", t.kind]
    for flag, value in (
        ("--spm-model", t.spm_model),
        ("--gpt2-encoder-json", t.gpt2_encoder_json),
        ("--gpt2-vocab-bpe", t.gpt2_vocab_bpe),
        ("--vocab", t.vocab),
    ):
        if value:
            cmd += [flag, value]
    if t.lowercase is not None:
        cmd += ["--lowercase", "yes" if t.lowercase else "no"]
    if cfg.source != "wordnet":
        cmd += ["--source", cfg.source, "--vectors", str(cfg.vectors), "--topk", str(cfg.topk)]
    return cmd + ["--output", cfg.output]
