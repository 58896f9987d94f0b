"""Which positions of a B x T batch the masked-LM head predicts, in one of two layouts.

* :class:`MaskSelection` (dynamic shapes, fairseq's ``masked_lm`` way): the M positions where
  ``target != pad``, taken by boolean indexing. M changes from batch to batch and is only known
  after a device-to-host sync.
* :class:`SlotSelection` (static shapes, google-research/electra's way): N fixed slots per
  sequence, N decided from the batch shape alone (``ceil((mask_prob + 0.005) * T)`` or a given
  number). The masked positions fill the first slots of their row, in order; the remaining slots
  point at unmasked positions whose target is padding, so they add nothing to any loss or count.
  Every tensor has a shape known before the step runs, and nothing waits for the device: the
  layout a compiled or captured step needs.

Both expose the same operations, on flattened selections of size S (S = M, or B * N):
``take`` (B x T -> S), ``gather`` (B x T x C -> S x C), ``put`` (write S values into a copy of
a B x T tensor) and ``rows_any`` (S bool -> B bool). The criterion chooses the layout and hands
it to the model's forward as keyword arguments (:meth:`forward_kwargs`: ``masked_tokens`` or
``mlm_positions``); the model rebuilds the same selection from them (:func:`from_forward_kwargs`).
"""

import math
from typing import Optional

import torch

from truneg_fairseq.errors import FlagError


class MaskSelection:
    def __init__(self, masked: torch.Tensor):
        """masked: B x T bool. With nothing masked every position is selected (targets there are
        padding and add 0); ``torch.where`` decides that without a device-to-host sync."""
        self.masked = torch.where(masked.any(), masked, torch.ones_like(masked))  # B x T
        self.dropped = None

    def take(self, x: torch.Tensor) -> torch.Tensor:
        return x[self.masked]  # M

    def put(self, x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y[self.masked] = values
        return y  # B x T

    def gather(self, features: torch.Tensor) -> torch.Tensor:
        return features[self.masked]  # M x C

    def rows_any(self, values: torch.Tensor) -> torch.Tensor:
        per_row = torch.zeros_like(self.masked)
        per_row[self.masked] = values
        return per_row.any(dim=1)  # B

    def forward_kwargs(self) -> dict:
        return {"masked_tokens": self.masked}


def static_slot_count(
    seq_len: int, mask_prob: Optional[float], max_predictions: Optional[int]
) -> int:
    """N, from the shape alone: ``max_predictions`` when given, else ELECTRA's
    ``ceil((mask_prob + 0.005) * T)`` (20 at T = 128 and mask_prob 0.15), at most T."""
    if max_predictions:
        return min(int(max_predictions), seq_len)
    if mask_prob is None:
        raise FlagError(
            "static prediction slots need --mask-prob (the task's) or --mlm-max-predictions N"
        )
    return max(1, min(seq_len, math.ceil((mask_prob + 0.005) * seq_len)))


class SlotSelection:
    def __init__(
        self, masked: Optional[torch.Tensor], n: int, positions: Optional[torch.Tensor] = None
    ):
        """masked: B x T bool; n: slots per row. Rows with more than n masked positions keep
        the first n; the others are counted in ``dropped`` (a device scalar, logged).
        ``positions`` (B x N, with ``masked`` None): slots chosen already (the model's side)."""
        if positions is None:
            # a stable sort of the mask puts each row's masked positions first, in order: B x T
            order = torch.sort(masked.to(torch.uint8), dim=1, descending=True, stable=True).indices
            positions = order[:, :n]  # B x N, distinct within a row
            self.dropped = (masked.sum(dim=1) - n).clamp(min=0).sum()
        else:
            self.dropped = None
        self.positions = positions  # B x N
        self.shape = self.positions.shape

    def take(self, x: torch.Tensor) -> torch.Tensor:
        return x.gather(1, self.positions).reshape(-1)  # B*N

    def put(self, x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return x.scatter(1, self.positions, values.view(self.shape).to(x.dtype))  # B x T

    def gather(self, features: torch.Tensor) -> torch.Tensor:
        idx = self.positions.unsqueeze(-1).expand(-1, -1, features.size(-1))  # B x N x C
        return features.gather(1, idx).reshape(-1, features.size(-1))  # B*N x C

    def rows_any(self, values: torch.Tensor) -> torch.Tensor:
        return values.view(self.shape).any(dim=1)  # B

    def forward_kwargs(self) -> dict:
        return {"mlm_positions": self.positions}


def from_forward_kwargs(
    masked_tokens: Optional[torch.Tensor], mlm_positions: Optional[torch.Tensor]
):
    """The selection a criterion described with :meth:`forward_kwargs` (exactly one of the two)."""
    if (masked_tokens is None) == (mlm_positions is None):
        raise ValueError(
            "give the model exactly one of masked_tokens (B x T bool) and mlm_positions (B x N)"
        )
    if mlm_positions is not None:
        return SlotSelection(None, mlm_positions.size(1), positions=mlm_positions)
    return MaskSelection(masked_tokens)
