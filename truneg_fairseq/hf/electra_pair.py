"""ELECTRA pre-training from a HuggingFace generator + discriminator pair, with the synonym-aware
replaced-token labels of the fairseq plugin (``--task electra --criterion electra``).

:class:`ElectraPretraining` is one ``nn.Module`` whose ``forward`` runs both models: the
generator's masked-LM pass at the prediction slots (with any objective of
:class:`~truneg_fairseq.hf.objective.TrueNegativeMLM`), a replacement sampled from the generator
softmax at each slot (:func:`truneg_fairseq.core.replaced_tokens.sample_replacements`), the
corrupted input, the discriminator's logits and the loss

    loss = gen_weight * L_mlm(objective) + disc_weight * mask_prob * sum_t BCE_t

(:mod:`truneg_fairseq.core.replaced_tokens`, as the fairseq criterions: per-token BCE over the non-pad tokens; a sample
equal to the original counts as original; ``rtd_synonym_policy`` labels a sampled synonym of the
original word ``replaced`` as ELECTRA does, ``original``, or ``ignore``). DDP wraps this module
and synchronises the one forward.

The published pairs share the token, position and type embeddings (and their LayerNorm); when
the generator's embeddings equal the discriminator's (``share_embeddings="auto"``) they become one
module, as in the plugin's ELECTRA, and the generator's output projection stays tied to them.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from truneg_fairseq.core.replaced_tokens import (
    RTD_POLICIES,
    RTDSettings,
    corrupt,
    sample_replacements,
)
from truneg_fairseq.hf.heads import ModelError, describe
from truneg_fairseq.hf.objective import TrueNegativeMLM


def _same_embeddings(gen, disc) -> bool:
    a, b = gen.electra.embeddings.state_dict(), disc.electra.embeddings.state_dict()
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a
    )


def check_pair(generator, discriminator) -> None:
    if not hasattr(generator, "generator_predictions"):
        raise ModelError(
            f"the ELECTRA generator must be an ElectraForMaskedLM; got {describe(generator)}"
        )
    if not hasattr(discriminator, "discriminator_predictions"):
        raise ModelError(
            "the ELECTRA discriminator must be an ElectraForPreTraining (replaced-token "
            f"detection head); got {describe(discriminator)}"
        )
    gv = generator.get_input_embeddings().num_embeddings
    dv = discriminator.get_input_embeddings().num_embeddings
    if gv != dv:
        raise ModelError(
            f"the generator has {gv} token embeddings and the discriminator {dv}: a pair shares "
            "one vocabulary"
        )


class ElectraPretraining(TrueNegativeMLM):
    """``ElectraPretraining(generator, discriminator, tokenizer, objective="mlm", ...)``: the
    objective's arguments of :class:`TrueNegativeMLM` apply to the generator's masked-LM term;
    ``gen_weight``, ``disc_weight`` and ``rtd_synonym_policy`` are the discriminator term's
    (:data:`truneg_fairseq.core.objectives.electra_rtd.RTD_PARAMS`)."""

    has_discriminator = True

    def __init__(
        self,
        generator: nn.Module,
        discriminator: nn.Module,
        tokenizer,
        objective: str = "mlm",
        synonym_table=None,
        mask_prob: float = 0.15,
        gen_weight: float = 1.0,
        disc_weight: float = 50.0,
        rtd_synonym_policy: str = "replaced",
        sample_temperature: float = 1.0,
        share_embeddings="auto",
        **objective_kw,
    ):
        check_pair(generator, discriminator)
        if rtd_synonym_policy not in RTD_POLICIES:
            raise ValueError(
                f"rtd_synonym_policy {rtd_synonym_policy!r} is not one of {', '.join(RTD_POLICIES)}"
            )
        if rtd_synonym_policy != "replaced" and synonym_table is None:
            raise ValueError(
                f"rtd_synonym_policy {rtd_synonym_policy} needs a synonym table (which "
                "replacements are synonyms); without one only 'replaced' applies"
            )
        if sample_temperature <= 0:
            raise ValueError(f"sample_temperature must be > 0, got {sample_temperature}")
        share = (
            _same_embeddings(generator, discriminator)
            if share_embeddings == "auto"
            else bool(share_embeddings)
        )
        if share:
            generator.electra.embeddings = discriminator.electra.embeddings
            if getattr(generator.config, "tie_word_embeddings", True):
                generator.generator_lm_head.weight = (
                    discriminator.electra.embeddings.word_embeddings.weight
                )
        super().__init__(generator, tokenizer, objective, synonym_table, **objective_kw)
        self.disc = discriminator
        self.shared_embeddings = share
        self.mask_prob, self.gen_weight, self.disc_weight = mask_prob, gen_weight, disc_weight
        self.rtd_synonym_policy = rtd_synonym_policy
        self.sample_temperature = float(sample_temperature)

    def mlm_pass(self, input_ids, attention_mask, target, sel, token_type_ids=None):
        """The generator's pass, then the replacements sampled at the slots, the corrupted input
        and the discriminator's logits (``rtd_sampled``, ``rtd_corrupted``, ``rtd_logits``)."""
        net = super().mlm_pass(input_ids, attention_mask, target, sel, token_type_ids)
        valid = sel.take(target).ne(self.pad)  # S
        sampled = sample_replacements(net.mlm_logits, self.sample_temperature, self.pad)  # S
        net.rtd_sampled, net.rtd_corrupted = corrupt(sel, input_ids, sampled, valid)
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        net.rtd_logits = self.disc(
            input_ids=net.rtd_corrupted, attention_mask=attention_mask, **kw
        ).logits  # B x T
        return net

    def rtd_settings(self):
        return RTDSettings(
            self.gen_weight, self.disc_weight, self.mask_prob, self.rtd_synonym_policy
        )

    def models(self):
        # two models, two directories: at the top a directory of a discriminator would load as
        # ElectraForMaskedLM with a random head (fill-mask, AutoModelForMaskedLM) without a word
        return {"discriminator": self.disc, "generator": self.mlm}
