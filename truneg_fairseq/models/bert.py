"""BERT (Devlin et al., 2019) on fairseq's RoBERTa: the same post-LayerNorm encoder, learned
positions, erf GELU and tied masked-LM head, with BERT's LayerNorm epsilon, so that a published
BERT checkpoint imported by ``scripts/convert_hf.py`` gives the same outputs as in HuggingFace
``transformers`` and trains with fairseq's ``masked_lm``/``sentence_prediction``, the plugin's
``squad`` task and every masked-LM criterion of the plugin unchanged.

How BERT's embeddings map onto RoBERTa's (done by the converter, no extra work per step):

* BERT position ``i`` is row ``padding_idx + 1 + i`` of fairseq's learned position table (fairseq
  counts positions from ``padding_idx + 1``); rows ``0..padding_idx`` stay zero.
* The token-type embedding of segment 0 is added to every position row (fairseq's tasks feed one
  segment). The other segments' offsets from segment 0 are kept in the buffer
  ``bert_segment_offsets`` (``type_vocab_size x C``, row 0 zero), unused in the forward pass, so
  an exported model keeps BERT's sentence-pair embeddings.
* Every LayerNorm uses ``--bert-layernorm-eps`` (BERT: 1e-12; fairseq's default 1e-5 shifts the
  outputs of a 0.02-scale model by more than 1e-4).

Archs: ``bert_hf_base``, ``bert_hf_large`` (BERT's sizes) and ``bert_hf_tiny`` (tests). fairseq's
own ``bert_base``/``bert_large`` belong to its legacy ``masked_lm`` model, not to this one.
"""

import logging

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaModel, base_architecture
from fairseq.utils import safe_getattr

from truneg_fairseq.models.roberta import RobertaObjectives, encoder_sizes

logger = logging.getLogger(__name__)


@register_model("bert")
class BertModel(RobertaObjectives, RobertaModel):
    """fairseq's RoBERTa with BERT's LayerNorm epsilon and a segment-offset buffer for export;
    it serves every masked-LM objective of the plugin (:mod:`truneg_fairseq.models.objectives`)."""

    def __init__(self, args, encoder):
        super().__init__(args, encoder)
        eps = args.bert_layernorm_eps
        # fairseq's LayerNorm is torch's (or apex's fused one on some GPUs): both read .eps
        for m in self.modules():
            if "LayerNorm" in type(m).__name__ and hasattr(m, "eps"):
                m.eps = eps
        self.register_buffer(
            "bert_segment_offsets", torch.zeros(args.bert_type_vocab_size, args.encoder_embed_dim)
        )

    @staticmethod
    def add_args(parser):
        RobertaModel.add_args(parser)
        parser.add_argument(
            "--bert-layernorm-eps", type=float, metavar="EPS",
            help="epsilon of every LayerNorm (BERT: 1e-12)",
        )
        parser.add_argument(
            "--bert-type-vocab-size", type=int, metavar="N",
            help="rows of the token-type (segment) offsets kept for export (BERT: 2)",
        )

    @classmethod
    def build_model(cls, args, task):
        bert_base_architecture(args)
        return super().build_model(args, task)

    def upgrade_state_dict_named(self, state_dict, name):
        prefix = name + "." if name else ""
        key = prefix + "bert_segment_offsets"
        if key not in state_dict:
            # a RoBERTa checkpoint restored into a BERT model: no segments to keep
            state_dict[key] = self.bert_segment_offsets.clone()
        super().upgrade_state_dict_named(state_dict, name)


def _bert_defaults(args):
    args.bert_layernorm_eps = safe_getattr(args, "bert_layernorm_eps", 1e-12)
    args.bert_type_vocab_size = safe_getattr(args, "bert_type_vocab_size", 2)
    args.max_positions = safe_getattr(args, "max_positions", 512)
    args.activation_fn = safe_getattr(args, "activation_fn", "gelu")  # erf GELU, as BERT's "gelu"
    args.pooler_activation_fn = safe_getattr(args, "pooler_activation_fn", "tanh")
    base_architecture(args)


@register_model_architecture("bert", "bert_hf_base")
def bert_base_architecture(args):
    _bert_defaults(args)


@register_model_architecture("bert", "bert_hf_large")
def bert_large_architecture(args):
    encoder_sizes(args, layers=24, dim=1024, ffn=4096, heads=16)
    _bert_defaults(args)


@register_model_architecture("bert", "bert_hf_tiny")
def bert_tiny_architecture(args):
    """2 layers of 32: for tests and smoke runs."""
    encoder_sizes(args, layers=2, dim=32, ffn=64, heads=2, max_positions=64)
    _bert_defaults(args)
