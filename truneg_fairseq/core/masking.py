"""Masking a whole B x T batch in a few numpy operations, from counters: the rule of the plugin's
batch masking (:class:`truneg_fairseq.data.batch_masking.BatchMaskedLMDataset`, fairseq's
``masked_lm`` semantics) and of the HF collator (:class:`truneg_fairseq.hf.MaskedLMCollator`).

Of each row's ``n`` candidate positions exactly ``int(mask_prob * n + u)`` are selected (``u``
uniform: probabilistic rounding), uniformly without replacement; with whole-word masking ``n``
counts words and a word's pieces go together. Of the selected, a share ``leave_unmasked_prob``
keeps its token, ``random_token_prob`` gets a random token drawn from ``replacement_cdf``, the
rest becomes the mask. Every random number is a counter-based hash of (seed, epoch, example index,
position): a row's mask depends on nothing else, whatever batch, worker, process or resumed run
it is made in. numpy only.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

_M64 = (1 << 64) - 1
_POS_BITS = 20  # positions per row below 2**20; the block index takes the bits above
# streams of random numbers (the same (seed, epoch, index, position) in another stream is unrelated)
_SELECT, _ROUND, _SPLIT = 1, 2, 3


def _mix_int(x: int) -> int:
    """splitmix64's finalizer on a Python int (the per-call key)."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over a uint64 array (wrapping arithmetic), in place: a bijection,
    so distinct counters give distinct outputs, with every output bit depending on every input bit."""
    x += np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def random_bits(seed: int, epoch: int, stream: int, index: np.ndarray, width: int) -> np.ndarray:
    """B x ``width`` uint64 random words, one per (block ``index``, position): a pure function of
    (seed, epoch, stream, index, position)."""
    key = _mix_int(_mix_int(_mix_int(seed & _M64) ^ (epoch & _M64)) ^ stream)
    counter = (index.astype(np.uint64)[:, None] << np.uint64(_POS_BITS)) | np.arange(
        width, dtype=np.uint64
    )
    counter ^= np.uint64(key)
    return _mix(counter)


def _uniform(bits: np.ndarray, high: bool) -> np.ndarray:
    """A float64 uniform in [0, 1) from 32 of the bits (the high or the low half)."""
    half = bits >> np.uint64(32) if high else bits & np.uint64(0xFFFFFFFF)
    return half.astype(np.float64) * (1.0 / 4294967296.0)


def select_exact(
    candidates: np.ndarray, rate: float, bits: np.ndarray, round_u: np.ndarray
) -> np.ndarray:
    """B x T bool: in each row, ``int(rate * n + u)`` of the row's ``n`` candidate positions,
    uniformly without replacement (the positions whose random keys are the smallest)."""
    b, t = candidates.shape
    n = candidates.sum(1)
    k = np.minimum((rate * n + round_u).astype(np.int64), n)
    # unique keys: 32 random bits above the position, so ties cannot make a row select too many
    keys = ((bits >> np.uint64(32)) << np.uint64(_POS_BITS)) | np.arange(t, dtype=np.uint64)
    keys[~candidates] = np.iinfo(np.uint64).max
    kth = np.sort(keys, axis=1)[np.arange(b), np.maximum(k - 1, 0)]
    return (keys <= kth[:, None]) & (k > 0)[:, None] & candidates


def mask_rows(
    tokens: np.ndarray,
    candidates: np.ndarray,
    index: np.ndarray,
    seed: int,
    epoch: int,
    mask_idx: int,
    pad: int,
    mask_prob: float,
    leave_unmasked_prob: float,
    random_token_prob: float,
    replacement_cdf: np.ndarray,
    word_begins: Optional[np.ndarray] = None,
):
    """(masked input, target) of a B x T int64 batch, each B x T int64: the masking of
    :class:`BatchMaskedLMDataset` (see the module docstring) over the ``candidates`` (B x T bool)
    of each row. ``index`` (B): the rows' example indices, which with (seed, epoch) decide every
    draw; ``replacement_cdf`` (V): cumulative probability of each id as a random replacement;
    ``word_begins`` (V bool): whole-word masking, None for single pieces."""
    b, t = tokens.shape
    bits = random_bits(seed, epoch, _SELECT, index, t)
    round_u = _uniform(random_bits(seed, epoch, _ROUND, index, 1)[:, 0], True)
    if word_begins is None:
        selected = select_exact(candidates, mask_prob, bits, round_u)
        word_start = None
    else:
        begins = word_begins[tokens] & candidates
        # the first position starts a word (fairseq: <s>, a special, always a candidate there)
        begins[:, 0] |= candidates[:, 0]
        chosen = select_exact(begins, mask_prob, bits, round_u)
        # every piece takes the decisions of its word's first piece
        word_start = np.maximum.accumulate(np.where(begins, np.arange(t), 0), axis=1)
        rows = np.arange(b)[:, None]
        selected = chosen[rows, word_start] & candidates
    src = tokens.copy()
    keep = replace = None
    p_either = leave_unmasked_prob + random_token_prob
    if p_either > 0:
        split = random_bits(seed, epoch, _SPLIT, index, t)
        u_either, u_which = _uniform(bits, False), _uniform(split, True)
        if word_start is not None:
            u_either, u_which = u_either[rows, word_start], u_which[rows, word_start]
        either = selected & (u_either < p_either)
        if random_token_prob == 0:
            keep = either
        elif leave_unmasked_prob == 0:
            replace = either
        else:
            which = u_which < leave_unmasked_prob / p_either
            keep, replace = either & which, either & ~which
    src[selected if keep is None else selected & ~keep] = mask_idx
    if replace is not None and replace.any():
        u_token = _uniform(split[replace], False)  # one per piece
        src[replace] = np.searchsorted(replacement_cdf, u_token, side="right")
    target = np.where(selected, tokens, pad)
    return src, target
