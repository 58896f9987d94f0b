"""Synonym tables: which (gold, prediction) vocabulary pairs count as synonyms.

A table belongs to one fairseq dictionary. It stores

* ``pairs``: sorted int64 ``(gold_id, pred_id)`` rows, both ids whole-word entries of the
  dictionary and ``pred`` a synonym of ``gold`` (never the same id);
* ``continuation_ids``: ids of entries that continue a word (sentencepiece pieces without the
  ``▁`` word-start mark, GPT-2 tokens without ``Ġ``, WordPiece ``##`` pieces; the tokenizer layer,
  :mod:`truneg_fairseq.text`, decides): a gold token followed by one of them is a subword
  piece and is never corrected;
* ``content_ids``: ids of the content-word entries (:func:`content_entries`): what the
  false-negative statistics count as a content-word prediction, decided by the same tokenizer
  view as the pairs (tables written before this array existed load with ``None``);
* the dictionary's fingerprint (sha256 of its first ``num_symbols`` symbols), so a table cannot be
  used with another dictionary by mistake.

Files are ``.npz`` archives written atomically; see :meth:`SynonymTable.save`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from truneg_fairseq.core.pairs import KEY_SHIFT
from truneg_fairseq.errors import SynonymTableError
from truneg_fairseq.fingerprints import dictionary_fingerprint  # noqa: F401  (re-exported)
from truneg_fairseq.lexicon.table_file import FORMAT_VERSION, load_arrays, save_arrays
from truneg_fairseq.text import (
    KINDS,
    Tokenizer,
    TokenizerError,
    TokenizerSpec,
    VocabView,
    build_tokenizer,
    load_dictionary_view,
)
from truneg_fairseq.text import is_word as _is_word

logger = logging.getLogger(__name__)

PROGRESS_SECONDS = 5.0  # a progress line at most this often while a table is built

TOKENIZERS = KINDS
SOURCES = ("wordnet", "embedding")


def stopwords() -> frozenset:
    """English stopwords (scikit-learn's list: no download needed)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


# --------------------------------------------------------------------------------------------
# Vocabulary view: which entries are whole words, which continue a word
# --------------------------------------------------------------------------------------------


def vocab_view(
    dict_path: os.PathLike,
    tokenizer,
    spm_model: Optional[os.PathLike] = None,
    gpt2_encoder_json: Optional[os.PathLike] = None,
    vocab: Optional[os.PathLike] = None,
    lowercase: Optional[bool] = None,
) -> VocabView:
    """Load ``dict.txt`` as fairseq does and classify each entry with ``tokenizer`` (a
    :class:`~truneg_fairseq.text.Tokenizer`, or its kind with the files named here)."""
    try:
        if not isinstance(tokenizer, Tokenizer):
            spec = TokenizerSpec(
                tokenizer,
                spm_model=spm_model and str(spm_model),
                gpt2_encoder_json=gpt2_encoder_json and str(gpt2_encoder_json),
                vocab=vocab and str(vocab),
                lowercase=lowercase,
            )
            tokenizer = build_tokenizer(spec, view_only=True)
        return load_dictionary_view(dict_path, tokenizer)
    except TokenizerError as e:
        raise SynonymTableError(str(e)) from None


def content_entries(view: VocabView, stop: Optional[frozenset] = None) -> np.ndarray:
    """Sorted int64 ids of the content-word entries of a dictionary: entries that start a word
    and are a whole word of ASCII letters (``view.words``, decided by the tokenizer: sentencepiece
    ``▁``, GPT-2 ``Ġ`` through its encoder.json, WordPiece without ``##``, whitespace words) that
    is not an English stopword (:func:`stopwords`), in any capitalisation."""
    stop = stopwords() if stop is None else stop
    return np.asarray(
        [i for i, w in enumerate(view.words) if w is not None and w.lower() not in stop],
        dtype=np.int64,
    )


def _case_key(word: str) -> str:
    """Capitalisation class, so 'Primary' pairs with 'Main' and 'primary' with 'main'."""
    if word.islower():
        return "lower"
    if word.isupper() and len(word) > 1:
        return "upper"
    if word[0].isupper() and word[1:].islower():
        return "title"
    return "mixed"


def _entries_by_word(view: VocabView) -> Dict[str, Dict[str, List[int]]]:
    by_word: Dict[str, Dict[str, List[int]]] = {}
    for i, w in enumerate(view.words):
        if w is None:
            continue
        ck = _case_key(w)
        if ck == "mixed":
            continue
        by_word.setdefault(w.lower(), {}).setdefault(ck, []).append(i)
    return by_word


# --------------------------------------------------------------------------------------------
# Synonym sources
# --------------------------------------------------------------------------------------------


def wordnet_synonyms(word: str, wn, stop: frozenset) -> Set[str]:
    """Single-word WordNet synonyms of ``word`` (lower-cased lemma names of its synsets).

    Only synsets that list ``word`` itself as a lemma are used, so inflected forms are not paired
    with base forms by morphological lookup ("ran" is not given the synonyms of "run").
    """
    out: Set[str] = set()
    for syn in wn.synsets(word):
        names = [lem.name().lower() for lem in syn.lemmas()]
        if word not in names:
            continue
        for n in names:
            if n != word and _is_word(n) and n not in stop:
                out.add(n)
    return out


def load_vectors(
    path: os.PathLike, wanted: Optional[Set[str]] = None
) -> Tuple[List[str], np.ndarray]:
    """Read GloVe (no header) or word2vec text vectors; keep only ``wanted`` words if given."""
    path = Path(path)
    if not path.is_file():
        raise SynonymTableError(f"--vectors {path} not found (GloVe or word2vec text format)")
    words: List[str] = []
    rows: List[np.ndarray] = []
    dim = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # word2vec header "count dim"
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise SynonymTableError(
                    f"{path}:{lineno}: {len(parts) - 1} values, expected {dim}: not a GloVe/word2vec text file"
                )
            w = parts[0]
            if wanted is not None and w not in wanted:
                continue
            try:
                rows.append(np.asarray(parts[1:], dtype=np.float32))
            except ValueError:
                raise SynonymTableError(f"{path}:{lineno}: non-numeric vector values")
            words.append(w)
    if dim is None:
        raise SynonymTableError(f"--vectors {path} is empty")
    return words, (np.stack(rows) if rows else np.zeros((0, dim), np.float32))


def embedding_neighbours(words: List[str], vecs: np.ndarray, k: int = 10) -> Dict[str, List[str]]:
    """Top-``k`` cosine neighbours of each word among ``words`` (itself excluded)."""
    import torch

    if len(words) < 2:
        return {}
    x = torch.from_numpy(vecs)
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-8)
    k = min(k, len(words) - 1)
    out: Dict[str, List[str]] = {}
    for start in range(0, len(words), 4096):
        sims = x[start : start + 4096] @ x.T  # chunk x N
        idx = torch.arange(sims.size(0))
        sims[idx, idx + start] = -2.0  # exclude self
        top = sims.topk(k, dim=1).indices
        for r, row in enumerate(top.tolist()):
            out[words[start + r]] = [words[j] for j in row]
    return out


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


@dataclass
class SynonymTable:
    pairs: np.ndarray  # P x 2 int64, sorted by (gold, pred)
    continuation_ids: np.ndarray  # C int64
    num_symbols: int
    fingerprint: str
    meta: dict = field(default_factory=dict)
    content_ids: Optional[np.ndarray] = None  # N int64 content-word entries (None: an older table)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_pairs(
        cls, pairs: Iterable[Tuple[int, int]], view: VocabView, meta: dict
    ) -> "SynonymTable":
        arr = np.asarray(sorted(set((int(g), int(p)) for g, p in pairs if g != p)), dtype=np.int64)
        arr = arr.reshape(-1, 2)
        cont = np.asarray([i for i, c in enumerate(view.continuation) if c], dtype=np.int64)
        return cls(
            arr,
            cont,
            len(view.symbols),
            dictionary_fingerprint(view.symbols),
            dict(meta),
            content_entries(view),
        )

    @classmethod
    def empty(cls, symbols: Sequence[str]) -> "SynonymTable":
        return cls(
            np.zeros((0, 2), np.int64),
            np.zeros(0, np.int64),
            len(symbols),
            dictionary_fingerprint(symbols),
            {"source": "empty"},
            np.zeros(0, np.int64),
        )

    # ---- lookups (host side; the training step uses SynonymLookup) --------------------------
    def keys(self) -> np.ndarray:
        return (self.pairs[:, 0] << KEY_SHIFT) | self.pairs[:, 1]

    def synonyms_of(self, gold_id: int) -> List[int]:
        lo, hi = np.searchsorted(self.pairs[:, 0], [gold_id, gold_id + 1])
        return self.pairs[lo:hi, 1].tolist()

    def __len__(self) -> int:
        return len(self.pairs)

    def content_fingerprint(self) -> str:
        """sha256 of what the table decides (its dictionary's fingerprint, its pairs and its
        continuation pieces), so a run can tell whether it is given the same table again: two
        files of the same content have the same fingerprint, wherever they lie."""
        h = hashlib.sha256(f"{self.fingerprint}:{self.num_symbols}\n".encode())
        for arr in (self.pairs, self.continuation_ids):
            a = np.ascontiguousarray(arr, dtype="<i8")
            h.update(f"{a.shape}".encode())
            h.update(a.tobytes())
        return h.hexdigest()

    # ---- io -------------------------------------------------------------------------------
    def save(self, path: os.PathLike) -> None:
        """Write atomically: a temporary file in the same directory, then ``os.replace``; a full
        disk or a read-only directory is one :class:`SynonymTableError` naming ``path``."""
        meta = dict(
            self.meta,
            format_version=FORMAT_VERSION,
            num_symbols=self.num_symbols,
            fingerprint=self.fingerprint,
        )
        arrays = {
            "pairs": self.pairs.astype(np.int64),
            "continuation_ids": self.continuation_ids.astype(np.int64),
        }
        if self.content_ids is not None:
            arrays["content_ids"] = self.content_ids.astype(np.int64)
        save_arrays(path, meta, arrays)

    @classmethod
    def load(cls, path: os.PathLike, vocab_size: Optional[int] = None) -> "SynonymTable":
        """The table of ``path``, every array and meta field checked (:mod:`.table_file`);
        ``vocab_size`` (the dictionary it is for) bounds the arrays before they are read."""
        pairs, cont, content, meta = load_arrays(path, vocab_size)
        return cls(pairs, cont, meta["num_symbols"], meta["fingerprint"], meta, content)

    def check_dictionary(self, symbols: Sequence[str], path: os.PathLike = "<table>") -> None:
        """Raise unless ``symbols`` (a task dictionary, which may append e.g. ``<mask>``) starts
        with exactly the dictionary this table was built for."""
        n = self.num_symbols
        if len(symbols) < n or dictionary_fingerprint(symbols[:n]) != self.fingerprint:
            raise SynonymTableError(
                f"synonym table {path} was built for another dictionary ({n} symbols, fingerprint "
                f"{self.fingerprint[:12]}); this task's dictionary has {len(symbols)} symbols, "
                f"fingerprint {dictionary_fingerprint(symbols[:n])[:12]}. Rebuild the table from "
                "this data directory's dict.txt with scripts/build_synonym_table.py"
            )


@dataclass
class BuildReport:
    num_pairs: int
    num_candidates: int  # non-stopword whole-word entries
    num_covered: int  # of those, entries with >= 1 synonym in the vocabulary
    seconds: float

    @property
    def coverage(self) -> float:
        return self.num_covered / max(self.num_candidates, 1)

    def describe(
        self, num_entries: int, source: str = "wordnet", topk: int = 10, tokenizer: str = ""
    ) -> str:
        """The coverage line, saying in words what it counts (the rules of :func:`build_table`)."""
        found = (
            "WordNet synonym" if source == "wordnet" else f"embedding neighbour (of the top {topk})"
        )
        line = (
            f"coverage {100 * self.coverage:.2f}%: {self.num_covered} of {self.num_candidates} candidate "
            f"entries have at least one {found} that is itself a candidate entry with the same capitalisation "
            f"(candidates: word-start entries, not continuation pieces, of ASCII letters only, not an English "
            f"stopword, not mixed-case; {num_entries} entries in all)"
        )
        if tokenizer == "wordpiece":
            line += (
                "; the paper's 62.51% for BERT's WordPiece vocabulary was counted with other rules and is "
                "not comparable"
            )
        return line


def build_table(
    view: VocabView,
    source: str = "wordnet",
    vectors: Optional[os.PathLike] = None,
    topk: int = 10,
    wn=None,
) -> Tuple[SynonymTable, BuildReport]:
    """Build the synonym table of a vocabulary from WordNet or from embedding neighbours."""
    if source not in SOURCES:
        raise SynonymTableError(f"--source {source!r} is not one of {', '.join(SOURCES)}")
    t0 = time.time()
    stop = stopwords()
    by_word = _entries_by_word(view)
    candidates = {w for w in by_word if w not in stop}

    if source == "wordnet":
        if wn is None:
            from truneg_fairseq.lexicon.wordnet import load_wordnet

            wn = load_wordnet()
        syn_of = {}
        last = time.time()
        for i, w in enumerate(sorted(candidates), 1):
            syn_of[w] = wordnet_synonyms(w, wn, stop)
            if time.time() - last >= PROGRESS_SECONDS:
                last = time.time()
                logger.info(f"WordNet synonyms: {i} of {len(candidates)} words looked up")
    else:
        if vectors is None:
            raise SynonymTableError(
                "--source embedding needs --vectors FILE (GloVe or word2vec text format)"
            )
        vwords, vecs = load_vectors(vectors, wanted=candidates)
        nb = embedding_neighbours(vwords, vecs, topk)
        syn_of = {w: set(nb.get(w, ())) - stop for w in candidates}

    pairs: List[Tuple[int, int]] = []
    covered = 0
    n_cand = 0
    for w, cases in by_word.items():
        if w not in candidates:
            continue
        for ck, gold_ids in cases.items():
            n_cand += len(gold_ids)
            preds = [p for s in syn_of.get(w, ()) if s in by_word for p in by_word[s].get(ck, ())]
            if preds:
                covered += len(gold_ids)
            pairs.extend((g, p) for g in gold_ids for p in preds)
    meta = {
        "source": source,
        "tokenizer": view.tokenizer,
        "topk": topk if source == "embedding" else None,
    }
    if source == "wordnet":
        meta["wordnet_version"] = wn.get_version()
    table = SynonymTable.from_pairs(pairs, view, meta)
    report = BuildReport(len(table), n_cand, covered, time.time() - t0)
    if not len(table):
        logger.warning(
            f"the synonym table holds 0 pairs: none of the {n_cand} candidate entries of the "
            f"{len(view.symbols)}-entry dictionary has a {source} synonym in it. Hard correction "
            "and --electra-rtd-synonym-policy refuse such a table; check --tokenizer and its "
            "files (the vocabulary must hold whole words), or give a larger dictionary"
        )
    table.meta.update(coverage=round(report.coverage, 6), num_candidates=n_cand)
    return table, report
