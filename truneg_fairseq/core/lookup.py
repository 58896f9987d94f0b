"""Device-side synonym lookups for the training step: tensor operations only, no Python loops.

A table is anything with the attributes of :class:`truneg_fairseq.lexicon.SynonymTable`
(``keys()``, ``continuation_ids``, ``content_ids``, ``num_symbols``): the lookup needs neither
WordNet nor the table's file format."""

from __future__ import annotations

import torch
import torch.nn as nn

from truneg_fairseq.core.pairs import KEY_SHIFT


class SynonymLookup(nn.Module):
    """Answers "is ``pred`` a synonym of ``gold``" for whole tensors of ids.

    Buffers (moved with ``.to(device)``, not saved in checkpoints):

    * ``keys``: sorted int64 ``gold << 32 | pred`` of every synonym pair, P entries;
    * ``continuation``: bool per vocabulary id, True for pieces that continue a word;
    * ``content``: bool per vocabulary id, True for content-word entries (the table's
      ``content_ids``); ``has_content`` is False for a table written without them.
    """

    def __init__(self, table, vocab_size: int):
        super().__init__()
        keys = (
            torch.from_numpy(table.keys().copy())
            if len(table)
            else torch.zeros(0, dtype=torch.long)
        )
        self.register_buffer("keys", keys, persistent=False)
        cont = torch.zeros(max(vocab_size, table.num_symbols), dtype=torch.bool)
        if len(table.continuation_ids):
            cont[torch.from_numpy(table.continuation_ids.copy())] = True
        self.register_buffer("continuation", cont, persistent=False)
        content = torch.zeros(max(vocab_size, table.num_symbols), dtype=torch.bool)
        self.has_content = table.content_ids is not None
        if self.has_content and len(table.content_ids):
            content[torch.from_numpy(table.content_ids.copy())] = True
        self.register_buffer("content", content, persistent=False)

    @property
    def num_pairs(self) -> int:
        return self.keys.numel()

    def is_synonym(self, gold: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        """Bool tensor, same shape as ``gold``/``pred``: True where (gold, pred) is a pair.

        One ``searchsorted`` over the sorted keys: O(N log P) on the device.
        """
        if self.keys.numel() == 0:
            return torch.zeros_like(gold, dtype=torch.bool)
        q = (gold.long() << KEY_SHIFT) | pred.long()
        idx = torch.searchsorted(self.keys, q).clamp_(max=self.keys.numel() - 1)
        return self.keys[idx] == q

    def synonyms(self, gold: torch.Tensor, k: int):
        """(ids, there), each ``gold.shape`` x ``k``: the first ``k`` synonyms of each gold id
        (in id order), and True where a synonym is there (``ids`` is 0 elsewhere). Two
        ``searchsorted`` over the sorted keys and one gather: no loop, no host sync."""
        shape = (*gold.shape, k)
        if self.keys.numel() == 0:
            zeros = torch.zeros(shape, dtype=torch.long, device=gold.device)
            return zeros, zeros.bool()
        first = torch.searchsorted(self.keys, gold.long() << KEY_SHIFT)  # gold.shape
        end = torch.searchsorted(self.keys, (gold.long() + 1) << KEY_SHIFT)
        idx = first.unsqueeze(-1) + torch.arange(k, device=gold.device)  # ... x k
        there = idx < end.unsqueeze(-1)
        pred = self.keys[idx.clamp(max=self.keys.numel() - 1)] & ((1 << KEY_SHIFT) - 1)
        return torch.where(there, pred, torch.zeros_like(pred)), there

    def ends_word(self, tokens: torch.Tensor) -> torch.Tensor:
        """Bool B x T: True where the next token does not continue the word at this position.

        ``tokens`` is B x T (the original, unmasked sentence). The last position of a row ends
        its word.
        """
        nxt_cont = self.continuation[tokens[:, 1:]]  # B x (T-1)
        last = torch.zeros_like(tokens[:, :1], dtype=torch.bool)  # B x 1
        return ~torch.cat([nxt_cont, last], dim=1)
