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

from truneg_fairseq.core.masking import mask_rows
from truneg_fairseq.errors import CorpusError, DataIndexError, FlagError


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
        bound = getattr(self.indexed, DataIndexError.BOUND, None)
        if bound is not None:  # the stream bypasses the split's own per-sentence check
            low, high = tokens.min(), tokens.max()
            if low < 0 or high >= bound[0]:
                bad = int(high if high >= bound[0] else low)
                row = int(np.flatnonzero((tokens == bad).any(axis=1))[0])
                raise DataIndexError.token_outside(self.indexed, f"block {int(index[row])}", bad)
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
