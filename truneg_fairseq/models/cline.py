"""CLINE's model: fairseq's RoBERTa plus a replaced-token-detection head and, for learned task
weights, three log-variances.

* ``rtd_head`` (``rtd_head.dense`` C -> C, GELU, ``rtd_head.layer_norm``, ``rtd_head.out_proj``
  C -> 1): one logit per token, > 0 meaning "replaced" (the per-token sigmoid of CLINE's Eq. 2-3).
* ``cline_log_vars`` (3: MLM, RTD, contrastive): the log-variances of homoscedastic uncertainty
  weighting (``--cline-learned-weights``); kept at zero otherwise.

Both exist only when the task pre-trains CLINE: ``--task cline`` builds the model, then calls
:meth:`ClineMixin.add_cline_pretraining`. Built for any other task (``sentence_prediction``
fine-tuning) the model is exactly RoBERTa: loading a CLINE checkpoint drops these tensors.
Loading a checkpoint without them (fairseq's ``roberta.base``) into a CLINE pre-training model
starts them fresh. Archs:
``cline_roberta_base``, ``cline_roberta_large`` and ``cline_roberta_tiny`` (tests); on the plugin's
BERT (an imported published checkpoint): ``cline_bert_hf_base``, ``cline_bert_hf_large``,
``cline_bert_hf_tiny``.

On the plugin's ELECTRA (``cline_electra_small/base/large/tiny``, :class:`ClineElectraModel`) no
head is added: the generator gives the MLM term, the discriminator's own RTD head the
replaced-token term and its ``<s>`` vectors the contrastive term; for pre-training only the
generator and ``cline_log_vars`` are added.
"""

import logging
from typing import Dict, Optional

import torch
import torch.nn as nn
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaModel, base_architecture, roberta_large_architecture
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from fairseq.utils import safe_getattr

from truneg_fairseq.errors import FlagError
from truneg_fairseq.models.bert import (
    BertModel,
    bert_base_architecture,
    bert_large_architecture,
    bert_tiny_architecture,
)
from truneg_fairseq.models.electra import (
    ElectraConfig,
    ElectraDiscriminatorHead,
    ElectraModel,
    electra_base_architecture,
    electra_large_architecture,
    electra_small_architecture,
    electra_tiny_architecture,
)
from truneg_fairseq.models.roberta import encoder_sizes
from truneg_fairseq.models.sizes import BERT_SIZES

logger = logging.getLogger(__name__)

CLINE_ONLY = ("rtd_head.", "cline_log_vars")


def check_vocabulary(saved: torch.Tensor, mine: torch.Tensor) -> None:
    """One clear error when a checkpoint's token embedding does not fit the data's dictionary
    (other size differences are left to the loader, which names every tensor)."""
    if saved.size(0) != mine.size(0):
        raise FlagError(
            f"the checkpoint's embedding has {saved.size(0)} rows but the data's "
            f"dict.txt gives {mine.size(0)} (with <mask>): the data was binarized against another "
            "dictionary. Rebuild it with scripts/make_cline_data.py --srcdict set to the dict.txt "
            "of the checkpoint (for fairseq's roberta.base: its dict.txt and GPT-2 BPE)"
        )


def cline_outputs(mlm_logits, rtd_logits, cls, log_vars) -> Dict[str, torch.Tensor]:
    """What CLINE's pass returns to the criterion (its only view of the model): ``mlm_logits``
    M x V at the masked positions of x_ori, ``rtd_logits`` 2B x T for the x_syn and x_ant rows
    (> 0: replaced), ``cls`` 3B x C ``<s>`` features of x_ori, x_syn, x_ant, and ``log_vars`` (3,
    the task-weight log-variances, so they too take part in the forward)."""
    return {"mlm_logits": mlm_logits, "rtd_logits": rtd_logits, "cls": cls, "log_vars": log_vars}


class ClineMixin:
    """The CLINE heads and pass, for any RoBERTa-family model (fairseq's RoBERTa, the plugin's
    BERT): put it first among the bases."""

    cline_pretraining = False

    @classmethod
    def build_model(cls, args, task):
        cls.default_architecture(args)
        return super().build_model(args, task)

    def add_cline_pretraining(self) -> None:
        """The pre-training-only parameters (see the module docstring); ``--task cline`` calls
        this after building the model."""
        self.cline_pretraining = True
        self.rtd_head = ElectraDiscriminatorHead(
            self.args.encoder_embed_dim, self.args.activation_fn, layer_norm=True
        )
        self.rtd_head.apply(init_bert_params)
        eps = getattr(self.args, "bert_layernorm_eps", None)
        if eps:  # the plugin's BERT: every LayerNorm has BERT's epsilon
            self.rtd_head.layer_norm.eps = eps
        self.cline_log_vars = nn.Parameter(torch.zeros(3))

    def forward(self, src_tokens, *args, cline_n_ori=None, cline_targets=None, **kwargs):
        """RoBERTa's forward; with ``cline_n_ori`` the CLINE pre-training pass
        (:meth:`cline_forward`). The criterion comes in through ``forward`` so that torch's
        DistributedDataParallel sees the pass and synchronises the gradients (a call to a named
        method would bypass it). ``cline_targets`` (the gold ids of x_ori) is not needed here: one
        encoder reads the masked x_ori for both the MLM and ``<s>``, as in the authors' code."""
        if cline_n_ori is not None:
            return self.cline_forward(src_tokens, cline_n_ori, kwargs["masked_tokens"])
        return super().forward(src_tokens, *args, **kwargs)

    def cline_forward(
        self, tokens: torch.Tensor, n_ori: int, masked_tokens: torch.Tensor
    ) -> Dict[str, torch.Tensor]:
        """One encoder pass over the stacked triples.

        tokens: 3B x T, rows [x_ori (masked); x_syn; x_ant], right-padded to one length;
        n_ori = B; masked_tokens: B x T bool (masked positions of x_ori). Returns
        :func:`cline_outputs` (MLM logits computed by RoBERTa's own ``lm_head``)."""
        features, _ = self.encoder.extract_features(tokens)  # 3B x T x C
        mlm_logits = self.encoder.output_layer(
            features[:n_ori], masked_tokens=masked_tokens
        )  # M x V
        rtd_logits = self.rtd_head(features[n_ori:])  # 2B x T
        return cline_outputs(mlm_logits, rtd_logits, features[:, 0, :], self.cline_log_vars)

    def upgrade_state_dict_named(self, state_dict, name):
        prefix = name + "." if name else ""
        mine = self.encoder.sentence_encoder.embed_tokens.weight
        # fairseq's published roberta.base still names its encoder "decoder"
        emb = next(
            (
                prefix + f"{e}.sentence_encoder.embed_tokens.weight"
                for e in ("encoder", "decoder")
                if prefix + f"{e}.sentence_encoder.embed_tokens.weight" in state_dict
            ),
            None,
        )
        if emb is not None:
            check_vocabulary(state_dict[emb], mine)
        cline_keys = [
            k
            for k in state_dict
            if k.startswith(prefix) and k[len(prefix) :].startswith(CLINE_ONLY)
        ]
        if not self.cline_pretraining:
            for k in cline_keys:
                del state_dict[k]
            if cline_keys:
                logger.info(
                    f"dropped {len(cline_keys)} CLINE pre-training tensors (RTD head, task weights)"
                )
        else:
            fresh = {
                prefix + k: v for k, v in self.state_dict().items() if k.startswith(CLINE_ONLY)
            }
            added = [k for k in fresh if k not in state_dict]
            for k in added:
                state_dict[k] = fresh[k].clone()
            if added:
                logger.info(
                    f"the checkpoint has no CLINE RTD head: {len(added)} tensors start fresh"
                )
        super().upgrade_state_dict_named(state_dict, name)


@register_model("cline")
class ClineModel(ClineMixin, RobertaModel):
    """CLINE on fairseq's RoBERTa (archs cline_roberta_*)."""

    @staticmethod
    def default_architecture(args):
        cline_base_architecture(args)


@register_model("cline_bert")
class ClineBertModel(ClineMixin, BertModel):
    """CLINE on the plugin's BERT (archs cline_bert_hf_*): continue an imported BERT with
    CLINE's objective (WordPiece data: ``make_cline_data.py --tokenizer wordpiece``)."""

    @staticmethod
    def default_architecture(args):
        bert_base_architecture(args)


register_model_architecture("cline_bert", "cline_bert_hf_base")(bert_base_architecture)
register_model_architecture("cline_bert", "cline_bert_hf_large")(bert_large_architecture)
register_model_architecture("cline_bert", "cline_bert_hf_tiny")(bert_tiny_architecture)


def _cline_defaults(args):
    args.max_positions = safe_getattr(args, "max_positions", 512)


@register_model_architecture("cline", "cline_roberta_base")
def cline_base_architecture(args):
    _cline_defaults(args)
    base_architecture(args)


@register_model_architecture("cline", "cline_roberta_large")
def cline_large_architecture(args):
    _cline_defaults(args)
    roberta_large_architecture(args)


@register_model_architecture("cline", "cline_roberta_tiny")
def cline_tiny_architecture(args):
    """2 layers of 32: for tests and smoke runs."""
    encoder_sizes(args, BERT_SIZES["tiny"])
    base_architecture(args)


@register_model("cline_electra", dataclass=ElectraConfig)
class ClineElectraModel(ElectraModel):
    """CLINE on the plugin's ELECTRA (archs cline_electra_*): each network does the part it is
    made for, so no head is added.

    * l1 (MLM) comes from the generator on the masked x_ori;
    * l2 (replaced-token detection on x_syn and x_ant) from the discriminator and its own RTD
      head (``discriminator_head``: the published ELECTRA head keeps its pre-trained weights);
    * l3 (contrastive) from the discriminator's ``<s>`` vectors of x_ori, x_syn and x_ant. The
      discriminator reads x_ori unmasked (the gold ids put back at the masked positions): it is
      the network that is fine-tuned later and never sees ``<mask>`` there.

    The generator's samples are not used: CLINE's x_syn/x_ant take the place of ELECTRA's
    sampled replacements. Only ``cline_log_vars`` is added for pre-training; any ELECTRA
    checkpoint (plugin or imported with scripts/convert_hf.py) continues with CLINE, and a
    CLINE checkpoint fine-tunes as ``electra_*`` or ``cline_electra_*`` (the log-variances and
    the generator are dropped)."""

    cline_pretraining = False

    def add_cline_pretraining(self) -> None:
        """The generator (its MLM term) and the task weights; ``--task cline`` calls this after
        building the model."""
        self.add_generator()
        if self.generator is None:
            raise FlagError(
                "--task cline on ELECTRA trains the generator's MLM term: drop --electra-discriminator-only"
            )
        self.cline_pretraining = True
        self.cline_log_vars = nn.Parameter(torch.zeros(3, device=self.embed_tokens.weight.device))

    def forward(self, src_tokens, *args, cline_n_ori=None, cline_targets=None, **kwargs):
        """ELECTRA's forward; with ``cline_n_ori`` the CLINE pre-training pass (through
        ``forward`` so that DistributedDataParallel synchronises it)."""
        if cline_n_ori is not None:
            masked = kwargs["masked_tokens"]
            return self.cline_forward(src_tokens, cline_n_ori, masked, cline_targets)
        return super().forward(src_tokens, *args, **kwargs)

    def cline_forward(
        self,
        tokens: torch.Tensor,
        n_ori: int,
        masked_tokens: torch.Tensor,
        targets: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """tokens: 3B x T, rows [x_ori (masked); x_syn; x_ant]; n_ori = B; masked_tokens: B x T
        bool; targets: B x T gold ids of x_ori at the masked positions (the discriminator then
        reads x_ori unmasked; without them it reads the rows as given). Returns
        :func:`cline_outputs` (MLM logits from the generator, RTD logits and ``<s>`` features
        from the discriminator)."""
        ori = tokens[:n_ori]
        mlm_logits = self.generator_logits(ori, masked_tokens)  # M x V
        if targets is not None:
            tokens = torch.cat([torch.where(masked_tokens, targets, ori), tokens[n_ori:]], dim=0)
        features = self.discriminator_features(tokens)  # 3B x T x H
        rtd_logits = self.discriminator_head(features[n_ori:])  # 2B x T
        return cline_outputs(mlm_logits, rtd_logits, features[:, 0, :], self.cline_log_vars)

    def upgrade_state_dict_named(self, state_dict, name):
        prefix = name + "." if name else ""
        emb = prefix + "embeddings.embed_tokens.weight"
        if emb in state_dict:
            check_vocabulary(state_dict[emb], self.embed_tokens.weight)
        if self.cline_pretraining and prefix + "cline_log_vars" not in state_dict:
            state_dict[prefix + "cline_log_vars"] = torch.zeros_like(self.cline_log_vars.detach())
            logger.info("the checkpoint has no CLINE task weights: cline_log_vars start at zero")
        super().upgrade_state_dict_named(state_dict, name)


register_model_architecture("cline_electra", "cline_electra_small")(electra_small_architecture)
register_model_architecture("cline_electra", "cline_electra_base")(electra_base_architecture)
register_model_architecture("cline_electra", "cline_electra_large")(electra_large_architecture)
register_model_architecture("cline_electra", "cline_electra_tiny")(electra_tiny_architecture)
