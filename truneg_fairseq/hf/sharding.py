"""The order of the examples in an epoch, the same in every process, and the rows that only fill
the processes' last batches (marked, so that nothing counts them).

With K processes, ``accelerate`` gives each process every K-th batch and fills the epoch's last
batches with examples repeated from its beginning, so that every process has as many full
batches: those repeats would enter the loss and the statistics twice. Here the order itself is
filled up to a multiple of batch x processes with *padding entries*: :class:`PaddedRows` turns
them into the repeated example marked ``PADDING_ROW``, and
:class:`~truneg_fairseq.hf.collator.MaskedLMCollator` leaves marked rows out of the batch (a batch
of padding rows only becomes one row flagged ``PADDING_ONLY``, which the trainer runs with weight
0, so that every process still takes part in each update). K processes then make the updates of
one process with gradient accumulation K, the epoch's last one included.
"""

from __future__ import annotations

from typing import Iterator

import torch

PADDING_ROW = "padding_row"  # feature key: a row that only fills a batch
PADDING_ONLY = "padding_only"  # batch key: the batch holds no real row (one stand-in row)


class EpochOrder(torch.utils.data.Sampler):
    """The indices of ``size`` examples for one epoch: a permutation drawn from (seed, epoch)
    (``shuffle=False``: 0, 1, ...), then padding entries up to a multiple of ``multiple``
    (batch x processes; 1 adds none). A padding entry is ``size + i``: example ``i`` again,
    marked. Every process draws the same order; :meth:`set_epoch` chooses the epoch."""

    def __init__(self, size: int, seed: int, multiple: int = 1, shuffle: bool = True):
        self.size, self.seed, self.multiple, self.shuffle = (
            int(size),
            int(seed),
            int(multiple),
            shuffle,
        )
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return -(-self.size // self.multiple) * self.multiple

    def __iter__(self) -> Iterator[int]:
        # 4 bytes an example (int32 below 2^31 examples: torch draws the same permutation for
        # either type), read out in pieces: as one Python list the order of 100M lines would take
        # 3.6 GB
        dtype = torch.int32 if self.size < 2**31 else torch.int64
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.size, generator=g, dtype=dtype)
        else:
            order = torch.arange(self.size, dtype=dtype)
        for piece in order.split(1 << 16):
            yield from piece.tolist()
        for j in range(len(self) - self.size):  # the repeats, from the epoch's beginning
            yield self.size + int(order[j % self.size])


class PaddedRows(torch.utils.data.Dataset):
    """``data`` (a map-style data set of feature dicts) read through :class:`EpochOrder`'s
    indices: ``i < len(data)`` is ``data[i]``; ``len(data) + i`` is ``data[i]`` marked as a
    padding row."""

    def __init__(self, data):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        n = len(self.data)
        if i < n:
            return self.data[i]
        return {**self.data[i - n], PADDING_ROW: True}
