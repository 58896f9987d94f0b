"""What a pre-training criterion gets from one call of the model's ``forward``.

torch's DistributedDataParallel (fairseq's default ``--ddp-backend pytorch_ddp``) all-reduces the
gradients of what runs inside its ``forward`` and of nothing else. So every plugin objective asks
the (possibly wrapped) model once per step, and the whole stochastic part of the step (argmax
predictions, ELECTRA's sampling and corrupted input, the sentence-KL encodings) happens in there:

    net = model(src_tokens, masked_tokens=M, mlm_targets=target, mlm_outputs=("embeddings",))
    # or mlm_positions=P (B x N static slots) instead of masked_tokens

``src_tokens`` B x T is the masked input; ``mlm_targets`` B x T holds the gold ids at the masked
positions and padding elsewhere (fairseq's ``masked_lm`` target); the positions are given as
``masked_tokens`` (B x T bool, dynamic) or ``mlm_positions`` (B x N, static slots), see
:mod:`.selection`. ``net`` is a :class:`~truneg_fairseq.core.model_outputs.MaskedLMOutputs`
(named fields, None where not asked for); S is the number of selected positions (M masked positions,
or B * N slots), V the vocabulary, E the token-embedding size, C the hidden size:

===================  =========  =============================================================
key                  shape      what
===================  =========  =============================================================
``mlm_logits``       S x V      masked-LM logits at the selected positions (gradient)
``mlm_pred``         S          their argmax (no gradient)
``gold_embed``       S x E      input-embedding rows of the gold tokens (``"embeddings"``)
``pred_embed``       S x E      input-embedding rows of the predictions (``"embeddings"``)
``kl_h_p``           B x T x C  masked-LM network's encoding of the prediction-filled sentence
                                (``"sentence_kl"``, gradient)
``kl_h_s``           B x T x C  its encoding of the original sentence (``"sentence_kl"``;
                                without gradient unless ``"sentence_kl_grad"`` is asked too)
``rtd_sampled``      S          ELECTRA: replacements sampled from the generator (no gradient;
                                positions whose target is padding keep their input token)
``rtd_corrupted``    B x T      ELECTRA: the discriminator's input
``rtd_logits``       B x T      ELECTRA: replaced-token-detection logits (> 0: replaced)
===================  =========  =============================================================

The synonym lexicon and all loss math stay outside the model (:mod:`truneg_fairseq.core`).

Which models serve which objectives is declared by their class:

* :class:`MaskedLMObjectives`: the fields above but the ``rtd_*`` ones (the plugin's RoBERTa
  ``truneg_roberta_*``, BERT ``bert_hf_*``, and ELECTRA's generator);
* :class:`ReplacedTokenDetection`: also the ``rtd_*`` keys (the plugin's ELECTRA).

fairseq's own ``RobertaModel`` (``--arch roberta_*``) declares neither: through its own forward
(``model(src_tokens, masked_tokens=M)``) it gives the masked-LM logits only, which is all that
hard correction needs.
"""

import abc
from typing import Optional, Sequence

import torch

from truneg_fairseq.core.model_outputs import MaskedLMOutputs
from truneg_fairseq.core.objectives import MODEL_OUTPUTS as OUTPUTS  # what mlm_outputs may ask
from truneg_fairseq.core.replaced_tokens import corrupt
from truneg_fairseq.core.selection import from_forward_kwargs
from truneg_fairseq.core.step import sentence_kl_pass


class MaskedLMObjectives(abc.ABC):
    """Capability: the pre-training pass of the module docstring. Put it before the fairseq
    model class among the bases; implement :meth:`mlm_encode`, :meth:`mlm_project` and
    :meth:`mlm_embedding_matrix` (called only from inside ``forward``)."""

    def forward(
        self,
        src_tokens,
        *args,
        mlm_targets=None,
        mlm_positions=None,
        mlm_outputs: Sequence[str] = (),
        **kwargs,
    ):
        """The model's own forward, or with ``mlm_targets`` the objectives' pass (a dict)."""
        if mlm_targets is None:
            return super().forward(src_tokens, *args, **kwargs)
        return self.objectives_forward(
            src_tokens, mlm_targets, kwargs.get("masked_tokens"), mlm_positions, mlm_outputs
        )

    # ---- to implement ------------------------------------------------------------------------
    @abc.abstractmethod
    def mlm_encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """B x T tokens -> B x T x C final features of the masked-LM network."""

    @abc.abstractmethod
    def mlm_project(self, features: torch.Tensor) -> torch.Tensor:
        """... x C features -> ... x V masked-LM logits (the LM head)."""

    @abc.abstractmethod
    def mlm_embedding_matrix(self) -> torch.Tensor:
        """V x E input token embeddings (the parameter itself, so gradient reaches it)."""

    @abc.abstractmethod
    def mlm_padding_idx(self) -> int:
        """The padding id of the model's dictionary."""

    # ---- the pass ----------------------------------------------------------------------------
    def objectives_forward(
        self,
        src_tokens: torch.Tensor,
        targets: torch.Tensor,
        masked_tokens: Optional[torch.Tensor],
        mlm_positions: Optional[torch.Tensor],
        outputs: Sequence[str],
    ) -> MaskedLMOutputs:
        unknown = set(outputs) - set(OUTPUTS)
        if unknown:
            raise ValueError(f"unknown mlm_outputs {sorted(unknown)}; known: {', '.join(OUTPUTS)}")
        sel = from_forward_kwargs(masked_tokens, mlm_positions)
        pad = self.mlm_padding_idx()
        features = self.mlm_encode(src_tokens)  # B x T x C
        logits = self.mlm_project(sel.gather(features))  # S x V
        pred = logits.detach().argmax(dim=-1)  # S
        gold = sel.take(targets)  # S
        valid = gold.ne(pad)  # S
        net = MaskedLMOutputs(logits, pred)
        if "embeddings" in outputs:
            weight = self.mlm_embedding_matrix()  # V x E
            net.gold_embed = weight[gold]  # S x E
            net.pred_embed = weight[pred]  # S x E
        if "sentence_kl" in outputs:
            net.kl_h_p, net.kl_h_s = sentence_kl_pass(
                self.mlm_encode,
                sel,
                src_tokens,
                targets,
                pred,
                valid,
                pad,
                "sentence_kl_grad" in outputs,
            )  # B x T x C each
        self.extend_objectives(net, src_tokens, sel, valid)
        return net

    def extend_objectives(
        self, net: MaskedLMOutputs, src_tokens: torch.Tensor, sel, valid: torch.Tensor
    ) -> None:
        """Fill further fields of ``net`` (ELECTRA: the replaced-token-detection pass)."""


class ReplacedTokenDetection(MaskedLMObjectives):
    """Capability: the ``rtd_*`` keys too. Implement :meth:`sample_replacements` and
    :meth:`discriminator_logits`."""

    @abc.abstractmethod
    def sample_replacements(self, logits: torch.Tensor) -> torch.Tensor:
        """S x V logits -> S sampled ids (no gradient)."""

    @abc.abstractmethod
    def discriminator_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """B x T tokens -> B x T replaced-token-detection logits."""

    def extend_objectives(self, net, src_tokens, sel, valid):
        sampled = self.sample_replacements(net.mlm_logits)  # S, no gradient
        net.rtd_sampled, net.rtd_corrupted = corrupt(sel, src_tokens, sampled, valid)  # S, B x T
        net.rtd_logits = self.discriminator_logits(net.rtd_corrupted)  # B x T
