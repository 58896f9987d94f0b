"""What one model pass gives the step: :class:`MaskedLMOutputs`, named and shaped fields in place
of a string-keyed dict (as transformers' ``ModelOutput`` classes). torch only.

A front end's model pass (the fairseq models' ``objectives_forward``,
:mod:`truneg_fairseq.models.objectives`; the HF objective's ``mlm_pass``) fills the fields an
objective asks for (its ``outputs``, :data:`truneg_fairseq.core.objectives.MODEL_OUTPUTS`) and
leaves the others None; the step and the objectives read them as attributes
(``step.net.gold_embed``). ``net["gold_embed"]``, ``"gold_embed" in net`` and item assignment
work too (a field that is None is not "in" it).

The class is a pytree node (:mod:`torch.utils._pytree`), so that a pass returning it can be
compiled (dynamo, AOTAutograd) and torch's DistributedDataParallel finds its tensors."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

import torch
import torch.utils._pytree as pytree


@dataclass
class MaskedLMOutputs:
    """S is the number of predicted positions (M masked positions, or B * N static slots), V the
    vocabulary, E the token-embedding size, C the hidden size."""

    mlm_logits: torch.Tensor  # S x V masked-LM logits (gradient)
    mlm_pred: torch.Tensor  # S their argmax (no gradient)
    gold_embed: Optional[torch.Tensor] = None  # S x E input-embedding rows of the gold tokens
    pred_embed: Optional[torch.Tensor] = None  # S x E ... of the predictions
    kl_h_p: Optional[torch.Tensor] = None  # B x T x C encoding of the prediction-filled sentence
    kl_h_s: Optional[torch.Tensor] = None  # B x T x C encoding of the original sentence
    rtd_sampled: Optional[torch.Tensor] = None  # S ELECTRA: replacements sampled (no gradient)
    rtd_corrupted: Optional[torch.Tensor] = None  # B x T ELECTRA: the discriminator's input
    rtd_logits: Optional[torch.Tensor] = (
        None  # B x T ELECTRA: replaced-token logits (> 0: replaced)
    )

    def __getitem__(self, key: str) -> torch.Tensor:
        value = getattr(self, key, None) if key in _NAMES else None
        if value is None:
            raise KeyError(
                f"{key!r}: the model pass gave no {key} (an objective names it in its outputs)"
            )
        return value

    def __setitem__(self, key: str, value) -> None:
        if key not in _NAMES:
            raise KeyError(f"{key!r} is not one of {', '.join(_NAMES)}")
        setattr(self, key, value)

    def __contains__(self, key: str) -> bool:
        return key in _NAMES and getattr(self, key) is not None


_NAMES = tuple(f.name for f in fields(MaskedLMOutputs))


def _flatten(out: MaskedLMOutputs):
    return [getattr(out, n) for n in _NAMES], None


def _unflatten(values, _context) -> MaskedLMOutputs:
    return MaskedLMOutputs(*values)


pytree.register_pytree_node(
    MaskedLMOutputs,
    _flatten,
    _unflatten,
    serialized_type_name=f"{__name__}.MaskedLMOutputs",
)
