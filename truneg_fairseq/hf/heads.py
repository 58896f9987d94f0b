"""A HuggingFace masked-LM model as the two parts the objectives need: the encoder (tokens ->
B x T x C final hidden states) and the masked-LM head (... x C -> ... x V logits).

With the two apart, the head runs at the prediction slots only (S = B x N rows instead of B x T,
as the fairseq plugin's models do), and the encoder's output is the sentence encoding of the
sentence-level KL. The split is known for the masked-LM classes of BERT, RoBERTa (and its
relatives with an ``lm_head``: XLM-R, CamemBERT, ...), the ELECTRA generator, DistilBERT and
ALBERT. Any other ``*ForMaskedLM`` model runs whole: its forward's logits at every position,
gathered at the slots, and its last hidden state (``output_hidden_states=True``) as the
encoding; a model whose forward gives no hidden states cannot serve the sentence-level KL.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
import torch.nn as nn

from truneg_fairseq.errors import ModelError  # noqa: F401  (defined in the one place of the errors)


def _electra_head(m):
    return lambda x: m.generator_lm_head(m.generator_predictions(x))


def _distilbert_head(m):
    return lambda x: m.vocab_projector(m.vocab_layer_norm(m.activation(m.vocab_transform(x))))


# (attributes the model has, its masked-LM head as a function of the model)
KNOWN_HEADS: Tuple[Tuple[Tuple[str, ...], Callable], ...] = (
    (("generator_predictions", "generator_lm_head"), _electra_head),
    (("vocab_transform", "vocab_layer_norm", "vocab_projector", "activation"), _distilbert_head),
    (("cls",), lambda m: m.cls),
    (("lm_head",), lambda m: m.lm_head),
    (("predictions",), lambda m: m.predictions),
)


def describe(model) -> str:
    return type(model).__name__


def check_masked_lm(model, what: str = "the model") -> None:
    """Refuse a model without a masked-LM head (a bare encoder, a classifier, an ELECTRA
    discriminator), naming the class to load instead."""
    if not isinstance(model, nn.Module) or not hasattr(model, "get_output_embeddings"):
        raise ModelError(
            f"{what} ({describe(model)}) is not a HuggingFace transformers model: load it with "
            "AutoModelForMaskedLM.from_pretrained(DIR)"
        )
    if model.get_output_embeddings() is None:
        hint = (
            " An ELECTRA discriminator (ElectraForPreTraining) detects replaced tokens; pre-train "
            "it with its generator (ElectraForMaskedLM): truneg_fairseq.hf.ElectraPretraining, or "
            "truneg-hf-train --generator DIR"
            if "ForPreTraining" in describe(model) and "Electra" in describe(model)
            else ""
        )
        raise ModelError(
            f"{what} ({describe(model)}) has no masked-LM head (its get_output_embeddings() is "
            f"None): load it with AutoModelForMaskedLM.from_pretrained(DIR).{hint}"
        )


class MaskedLMParts:
    """``encode(input_ids, attention_mask) -> B x T x C`` and ``project(x) -> ... x V`` of a
    masked-LM model, or (``split`` False) ``whole(...) -> (B x T x V logits, B x T x C or None)``."""

    def __init__(self, model: nn.Module):
        check_masked_lm(model)
        self.model = model
        self.head: Optional[Callable] = None
        base = getattr(model, "base_model", model)
        if base is not model:
            for attrs, head in KNOWN_HEADS:
                if all(isinstance(getattr(model, a, None), nn.Module) for a in attrs):
                    self.head = head(model)
                    break
        self.base = base
        self.split = self.head is not None

    def encode(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.base(input_ids=input_ids, attention_mask=attention_mask, **kw)[0]  # B x T x C

    def project(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(features)  # ... x V

    def whole(self, input_ids, attention_mask, hidden: bool, token_type_ids=None):
        """(B x T x V logits, B x T x C last hidden state or None) from the model's forward."""
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=hidden,
            return_dict=True,
            **kw,
        )
        states = getattr(out, "hidden_states", None) if hidden else None
        return out.logits, (states[-1] if states else None)

    def gives_encodings(self) -> bool:
        """Whether the model gives B x T x C sentence encodings (asked once, on two tokens)."""
        if self.split:
            return True
        device = next(self.model.parameters()).device
        ids = torch.zeros(1, 2, dtype=torch.long, device=device)
        was = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                _, states = self.whole(ids, torch.ones_like(ids), hidden=True)
        finally:
            self.model.train(was)
        return states is not None and states.dim() == 3
