"""Word vectors from co-occurrence counts (PPMI + truncated SVD), one row per ``dict.txt`` entry.

A small masked LM trained for minutes on a CPU spends them in the unigram plateau, predicting
separators and stopwords. Starting its token embeddings (tied to the output projection) from
count-based vectors of the same training text gives it a semantic space from the first update,
so its predictions become content words, and false negatives appear, within the budget of the
demo. Classic distributional vectors: counts of word pairs within ``window`` words of each
other in a line, positive pointwise mutual information with context-distribution smoothing
(exponent 0.75), a rank-``dim`` truncated SVD, rows scaled to unit length.
"""

from __future__ import annotations

import logging
import os
from typing import Iterable, List, Sequence

import numpy as np

logger = logging.getLogger(__name__)


def dictionary_ids(symbols: Sequence[str], lines: Iterable[str]) -> np.ndarray:
    """The lines as one id array, lines separated by -1 (a word outside ``symbols`` is -1 too)."""
    index = {s: i for i, s in enumerate(symbols)}
    out: List[int] = []
    for line in lines:
        out.extend(index.get(w, -1) for w in line.split())
        out.append(-1)
    return np.asarray(out, dtype=np.int64)


def cooccurrence_vectors(
    ids: np.ndarray, vocab: int, dim: int = 128, window: int = 5
) -> np.ndarray:
    """vocab x dim unit-length vectors (rows of words that never occur are zero)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import svds

    rows, cols = [], []
    breaks = np.cumsum(ids < 0)  # pairs with a -1 between them span two lines
    for d in range(1, window + 1):  # pairs d apart, both directions
        a, b = ids[:-d], ids[d:]
        ok = (a >= 0) & (b >= 0) & (breaks[d:] == breaks[:-d])
        rows += [a[ok], b[ok]]
        cols += [b[ok], a[ok]]
    r, c = np.concatenate(rows), np.concatenate(cols)
    if r.size == 0:
        raise ValueError("no word pairs: the text has no two dictionary words within a line")
    counts = sp.coo_matrix(
        (np.ones(r.size, dtype=np.float64), (r, c)), shape=(vocab, vocab)
    ).tocsr()
    counts.sum_duplicates()
    total = counts.sum()
    row_sum = np.asarray(counts.sum(axis=1)).ravel()
    ctx = np.asarray(counts.sum(axis=0)).ravel() ** 0.75
    ctx = ctx / ctx.sum() * total
    coo = counts.tocoo()
    pmi = np.log(coo.data * total / (row_sum[coo.row] * ctx[coo.col]))
    keep = pmi > 0
    ppmi = sp.coo_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=(vocab, vocab)).tocsc()
    k = min(dim, min(ppmi.shape) - 1)
    u, s, _ = svds(ppmi, k=k, random_state=0)
    vec = np.zeros((vocab, dim), dtype=np.float32)
    vec[:, :k] = u * np.sqrt(s)
    vec[np.diff(ppmi.tocsr().indptr) == 0] = 0  # no context: the SVD's round-off, not a direction
    norm = np.linalg.norm(vec, axis=1, keepdims=True)
    return np.divide(vec, norm, out=np.zeros_like(vec), where=norm > 0)


def write_vectors(
    dict_txt: str, text: str, out: str, dim: int = 128, window: int = 5
) -> np.ndarray:
    """Vectors for every entry of fairseq's dictionary ``dict_txt`` (its specials and
    ``<mask>`` included, as zero rows) from the words of ``text``; saved as ``.npy`` (atomically;
    a write that fails for lack of space is :class:`~truneg_fairseq.errors.OutputDirError`)."""
    from fairseq.data import Dictionary

    from truneg_fairseq.outputs import atomic_open, write_errors

    d = Dictionary.load(dict_txt)
    d.add_symbol("<mask>")  # as the masked-LM tasks add it: rows match the model's embedding
    with open(text, encoding="utf-8") as f:
        ids = dictionary_ids(d.symbols, f)
    ids[(ids >= 0) & (ids < d.nspecial)] = -1  # specials are not words
    vec = cooccurrence_vectors(ids, len(d), dim, window)
    with write_errors(out), atomic_open(out, "wb") as f:  # a full disk: one OutputDirError
        np.save(f, vec)
    covered = int((np.abs(vec).sum(axis=1) > 0).sum())
    logger.info(
        f"{out}: {len(d)} x {dim} vectors from {os.path.basename(text)} ({covered} entries occur in it)"
    )
    return vec
