"""Masked-LM batches made a whole batch at a time: read, pad and mask in a few numpy operations.

fairseq's ``masked_lm`` builds every item on its own (``TokenBlockDataset`` concatenates the
sentences of a block, ``MaskTokensDataset`` draws its mask with a fresh numpy generator, each
item twice: once for the input, once for the target) and pads them in the collater. On one core
that costs far more than an ELECTRA-small step takes on a GPU, so the loader workers fall behind.
:class:`BatchMaskedLMDataset` hands the collater bare indices and makes the batch there:

* **reading**: when the blocks are fairseq's ``TokenBlockDataset`` over an mmap
  ``MMapIndexedDataset`` (what ``masked_lm`` loads), a block is one contiguous run of the
  ``.bin`` token stream, so the batch is one gather from it; other datasets are read item by
  item (the masking stays batched);
* **masking** (the semantics of ``MaskTokensDataset``): of each row's ``n`` positions (``<s>``
  and ``</s>`` included, padding never), exactly ``int(mask_prob * n + u)`` are selected, ``u``
  uniform (probabilistic rounding), uniformly without replacement; with ``--mask-whole-words``
  ``n`` counts words and a word's pieces go together. Of the selected, a share
  ``leave_unmasked_prob`` keeps its token, ``random_token_prob`` gets a random non-special token
  (by frequency with ``--freq-weighted-replacement``), the rest becomes ``<mask>``. The target is
  the original token at every selected position, padding elsewhere.

Random numbers come from a counter-based hash of (seed, epoch, block index, position), not from
fairseq's per-item generator: the masks differ from ``masked_lm``'s draw by draw but follow the
same distribution, and a block's mask depends only on (seed, epoch, index), whatever batch,
worker or resumed run it is collated in.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import torch
from fairseq.data import FairseqDataset, PrependTokenDataset, TokenBlockDataset
from fairseq.data.indexed_dataset import MMapIndexedDataset

from truneg_fairseq.errors import CorpusError, FlagError

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


class BatchMaskedLMDataset(FairseqDataset):
    """Masked-LM samples of ``dataset`` (blocks starting with ``<s>``, as ``masked_lm``'s
    ``_load_dataset_split`` returns them) in ``masked_lm``'s layout: ``id``, ``net_input``
    (``src_tokens``, ``src_lengths``, ``src_id`` with ``include_index``, ``target_tokens`` with
    ``include_target_tokens``), ``target``, ``nsentences``, ``ntokens``.

    ``__getitem__`` returns the index alone; the collater reads, pads and masks the batch.
    ``pad_to``: every batch padded on the right to this many columns (padding in the input and
    the target, so nothing counts it), one width for a compiled step."""

    def __init__(
        self,
        dataset,
        dictionary,
        mask_idx: int,
        seed: int = 1,
        mask_prob: float = 0.15,
        leave_unmasked_prob: float = 0.1,
        random_token_prob: float = 0.1,
        freq_weighted_replacement: bool = False,
        word_begins: Optional[torch.Tensor] = None,
        include_target_tokens: bool = False,
        include_index: bool = True,
        skip_masking: bool = False,
        pad_to: Optional[int] = None,
    ):
        super().__init__()
        self.dataset = dataset
        self.pad_to = pad_to
        if not 0.0 < mask_prob < 1.0:
            raise FlagError(f"--mask-prob must be in (0, 1), got {mask_prob}")
        if (
            min(leave_unmasked_prob, random_token_prob) < 0
            or leave_unmasked_prob + random_token_prob > 1
        ):
            raise FlagError(
                "--leave-unmasked-prob and --random-token-prob must be >= 0 and sum to at most 1"
            )
        self.pad, self.mask_idx = dictionary.pad(), mask_idx
        self.seed, self.epoch = seed, 0
        self.mask_prob, self.leave_unmasked_prob, self.random_token_prob = (
            mask_prob,
            leave_unmasked_prob,
            random_token_prob,
        )
        self.include_target_tokens, self.include_index, self.skip_masking = (
            include_target_tokens,
            include_index,
            skip_masking,
        )
        self.word_begins = None if word_begins is None else np.asarray(word_begins, dtype=bool)
        weights = np.array(
            dictionary.count if freq_weighted_replacement else np.ones(len(dictionary)),
            dtype=np.float64,
        )
        weights[: dictionary.nspecial] = 0  # as MaskTokensDataset: no special as a random token
        self.replacement_cdf = np.cumsum(weights) / weights.sum()
        self._blocks = _stream_blocks(dataset)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return True  # only the masks change between epochs, not the sizes

    def set_epoch(self, epoch, **unused):
        self.epoch = epoch

    def __getitem__(self, index):
        return index

    def __len__(self):
        return len(self.dataset)

    def ordered_indices(self):
        return np.arange(len(self), dtype=np.int64)

    @property
    def sizes(self):
        return self.dataset.sizes

    def num_tokens(self, index):
        return self.dataset.sizes[index]

    def num_tokens_vec(self, indices):
        return self.dataset.sizes[indices]

    def size(self, index):
        return self.dataset.sizes[index]

    def collater(self, samples: List[int]):
        if len(samples) == 0:
            return {}
        index = np.asarray(samples, dtype=np.int64)
        tokens, lengths = self.read(index)
        src, target = self.mask(tokens, lengths, index)
        if self.pad_to is not None and src.shape[1] < self.pad_to:
            # after masking: a row's mask depends on its tokens, not on the batch's width
            extra = ((0, 0), (0, self.pad_to - src.shape[1]))
            src = np.pad(src, extra, constant_values=self.pad)
            target = np.pad(target, extra, constant_values=self.pad)
        src_t, tgt_t, len_t, id_t = (torch.from_numpy(a) for a in (src, target, lengths, index))
        net_input = {"src_tokens": src_t, "src_lengths": len_t}
        if self.include_target_tokens:
            net_input["target_tokens"] = tgt_t
        if self.include_index:
            net_input["src_id"] = id_t
        return {
            "id": id_t,
            "net_input": net_input,
            "target": tgt_t,
            "nsentences": len(samples),
            "ntokens": int(lengths.sum()),
        }

    def read(self, index: np.ndarray):
        """(B x T int64 tokens padded on the right, B int64 lengths) of the blocks ``index``."""
        if self._blocks is not None:
            return self._blocks.read(index, self.pad)
        items = [self.dataset[int(i)] for i in index]
        lengths = np.array([len(x) for x in items], dtype=np.int64)
        tokens = np.full((len(items), int(lengths.max())), self.pad, dtype=np.int64)
        for row, item in enumerate(items):  # fallback for datasets without a token stream
            tokens[row, : len(item)] = item.numpy()
        return tokens, lengths

    def mask(self, tokens: np.ndarray, lengths: np.ndarray, index: np.ndarray):
        """(masked input, target) of a B x T batch, each B x T int64."""
        t = tokens.shape[1]
        valid = np.arange(t) < lengths[:, None]
        if self.skip_masking:
            return tokens, tokens.copy()
        if (tokens[valid] == self.mask_idx).any():
            raise CorpusError(
                f"the data holds the <mask> symbol (id {self.mask_idx}): it must not be in the corpus"
            )
        return mask_rows(
            tokens,
            valid,
            index,
            self.seed,
            self.epoch,
            self.mask_idx,
            self.pad,
            self.mask_prob,
            self.leave_unmasked_prob,
            self.random_token_prob,
            self.replacement_cdf,
            self.word_begins,
        )


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


class _TokenStream:
    """Blocks of a ``TokenBlockDataset`` over an ``MMapIndexedDataset``, read as runs of the
    ``.bin`` token stream (a block is contiguous there in every --sample-break-mode), with the
    ``<s>`` that ``PrependTokenDataset`` adds."""

    def __init__(self, blocks: TokenBlockDataset, indexed: MMapIndexedDataset, bos: int):
        self.indexed, self.bos = indexed, bos
        itemsize = np.dtype(indexed._index.dtype).itemsize
        first_sentence, offset = (
            blocks.block_to_dataset_index[:, 0],
            blocks.block_to_dataset_index[:, 1],
        )
        self.starts = (indexed._index._pointers[first_sentence] // itemsize + offset).astype(
            np.int64
        )
        self.lengths = np.asarray(blocks.sizes, dtype=np.int64) + 1
        self._flat = None

    @property
    def flat(self) -> np.ndarray:
        if self._flat is None:  # opened in each worker: the mmap itself is not pickled
            self._flat = np.frombuffer(self.indexed._bin_buffer, dtype=self.indexed._index.dtype)
        return self._flat

    def __getstate__(self):
        return {**self.__dict__, "_flat": None}

    def read(self, index: np.ndarray, pad: int):
        lengths = self.lengths[index]
        t = int(lengths.max())
        pos = np.arange(t)
        valid = pos < lengths[:, None]
        at = self.starts[index][:, None] + (pos - 1)  # column 0 is <s>
        flat = self.flat
        tokens = flat[np.clip(at, 0, len(flat) - 1)].astype(np.int64)
        tokens[~valid] = pad
        tokens[:, 0] = self.bos
        return tokens, lengths


def _stream_blocks(dataset) -> Optional[_TokenStream]:
    """The token-stream reader of ``masked_lm``'s blocks, or None for another layout."""
    if not isinstance(dataset, PrependTokenDataset) or dataset.token is None:
        return None
    if not isinstance(dataset.dataset, TokenBlockDataset):
        return None
    blocks = dataset.dataset
    if not isinstance(blocks.dataset, MMapIndexedDataset) or getattr(
        blocks, "include_targets", False
    ):
        return None
    return _TokenStream(blocks, blocks.dataset, dataset.token)
