"""WordNet provisioning and synonym tables (build, save, load); the device lookup of a table is
:class:`truneg_fairseq.core.lookup.SynonymLookup`."""

from .synonyms import (
    SynonymTable,
    SynonymTableError,
    VocabView,
    build_table,
    dictionary_fingerprint,
    vocab_view,
)
from .wordnet import WordNetNotFoundError, load_wordnet

__all__ = [
    "SynonymTable",
    "SynonymTableError",
    "VocabView",
    "WordNetNotFoundError",
    "build_table",
    "dictionary_fingerprint",
    "load_wordnet",
    "vocab_view",
]
