"""Synonym tables for a HuggingFace tokenizer's vocabulary.

A table stores token ids, so it belongs to one vocabulary in one id order. Here that order is the
HF tokenizer's (``tokenizer.convert_ids_to_tokens(range(len(tokenizer)))``), not the row order of
a fairseq ``dict.txt`` imported from it (:mod:`truneg_fairseq.convert`): a table built for one is
refused for the other by the fingerprint check of :class:`~truneg_fairseq.lexicon.SynonymTable`.

Which entries are whole words and which continue one is read from the entry's spelling with the
marks of the tokenizer layer (:mod:`truneg_fairseq.text`): WordPiece ``##`` (BERT, ELECTRA,
DistilBERT), GPT-2's byte-level ``Ġ`` (RoBERTa) and sentencepiece's ``▁`` (ALBERT, XLM-R,
DeBERTa-v2); the tokenizer's special tokens are neither. The pairs, the content words and the
coverage come from :func:`truneg_fairseq.lexicon.build_table`, as for a fairseq dictionary.
"""

from __future__ import annotations

import logging
import os
from typing import List, Optional

from truneg_fairseq.core.lookup import SynonymLookup
from truneg_fairseq.errors import SynonymTableError
from truneg_fairseq.lexicon import SynonymTable, build_table
from truneg_fairseq.text import VocabView
from truneg_fairseq.text.marks import marked_word, word_marks

logger = logging.getLogger(__name__)

FAMILIES = ("wordpiece", "gpt2", "sentencepiece")


def hf_symbols(tokenizer) -> List[str]:
    """The tokenizer's vocabulary in id order (added tokens included)."""
    return list(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))


def tokenizer_family(symbols: List[str]) -> str:
    """``wordpiece``, ``gpt2`` or ``sentencepiece``, from the marks the entries carry."""
    family, _ = word_marks(symbols)
    if family is None:
        raise SynonymTableError(
            "the tokenizer's vocabulary carries none of the word marks a synonym table needs "
            "(WordPiece '##', byte-level BPE 'Ġ', sentencepiece '▁'): give a BERT, RoBERTa, "
            "ELECTRA, ALBERT or XLM-R style tokenizer"
        )
    return family


def hf_vocab_view(tokenizer) -> VocabView:
    """The :class:`~truneg_fairseq.text.VocabView` of a HF tokenizer (ids = the tokenizer's)."""
    symbols = hf_symbols(tokenizer)
    family = tokenizer_family(symbols)
    special = set(tokenizer.all_special_ids)
    words: List[Optional[str]] = [None] * len(symbols)
    cont = [False] * len(symbols)
    for i, s in enumerate(symbols):
        if i not in special and s is not None:
            words[i], cont[i] = marked_word(s, family)
    return VocabView(symbols, words, cont, family)


def build_synonym_table(tokenizer, source: str = "wordnet", vectors=None, topk: int = 10, wn=None):
    """(:class:`~truneg_fairseq.lexicon.SynonymTable`, build report) of the tokenizer's
    vocabulary, from WordNet (default) or embedding neighbours (``vectors``)."""
    view = hf_vocab_view(tokenizer)
    table, report = build_table(view, source=source, vectors=vectors, topk=topk, wn=wn)
    logger.info(
        f"synonym table for the tokenizer's {len(view.symbols)} entries ({view.tokenizer}): "
        f"{len(table)} pairs; " + report.describe(len(view.symbols), source, topk, view.tokenizer)
    )
    return table, report


def load_synonym_table(path: os.PathLike, tokenizer, flag: str = "--synonym-table") -> SynonymTable:
    """The table of ``path``, checked to be built for this tokenizer's vocabulary (one
    :class:`~truneg_fairseq.errors.SynonymTableError` naming the file and the fix otherwise)."""
    symbols = hf_symbols(tokenizer)
    table = SynonymTable.load(path, len(symbols))
    try:
        table.check_dictionary(symbols, path)
    except SynonymTableError:
        raise SynonymTableError(
            f"{flag} {path} was built for another vocabulary ({table.num_symbols} entries, "
            f"tokenizer {table.meta.get('tokenizer')}), not for this tokenizer's {len(symbols)} "
            "entries in its id order (a table for a fairseq dict.txt, even one imported from "
            "this model, numbers the entries differently). Build one for the tokenizer: "
            "`truneg-hf-train MODEL_DIR --build-synonyms FILE` or "
            "truneg_fairseq.hf.build_synonym_table(tokenizer)"
        ) from None
    return table


def synonym_lookup(table: SynonymTable, tokenizer) -> SynonymLookup:
    """The device-side lookup of ``table`` (checked against the tokenizer's vocabulary)."""
    symbols = hf_symbols(tokenizer)
    table.check_dictionary(symbols)
    return SynonymLookup(table, len(symbols))
