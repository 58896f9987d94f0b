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
* BERT's pooler (``pooler.dense``, unused by the masked-LM and fine-tuning heads here) is kept in
  the buffers ``bert_pooler_weight``/``bert_pooler_bias`` (zero when the source had none), so an
  exported model gives ``BertModel``'s pooled output as published.

``--bert-sizes-from DIR`` takes every size the command line leaves unset from an import
directory (:mod:`truneg_fairseq.models.import_sizes`): ``--arch bert_hf --bert-sizes-from
imported/all-MiniLM-L6`` continues a 6 x 384 model with no size flags.

``--bert-freeze-encoder`` trains the masked-LM head alone (its dense layer, LayerNorm and output
bias); the encoder, the embeddings and the output projection tied to them keep their values
exactly. It is the head warm-up of a model imported without a masked-LM head.

Archs: ``bert_hf`` (BERT-base defaults, meant with ``--bert-sizes-from``), ``bert_hf_base``,
``bert_hf_large`` (BERT's sizes) and ``bert_hf_tiny`` (tests). fairseq's
own ``bert_base``/``bert_large`` belong to its legacy ``masked_lm`` model, not to this one.
"""

import logging

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaModel, base_architecture
from fairseq.utils import safe_getattr

from truneg_fairseq.models import import_sizes
from truneg_fairseq.models.encoder_layer import BatchFirstRoberta
from truneg_fairseq.models.layernorm import set_layernorm_eps
from truneg_fairseq.models.roberta import RobertaObjectives, encoder_sizes
from truneg_fairseq.models.sizes import BERT_SIZES, EncoderSize
from truneg_fairseq.models.update_hooks import UpdateHooks

logger = logging.getLogger(__name__)


@register_model("bert")
class BertModel(BatchFirstRoberta, UpdateHooks, RobertaObjectives, RobertaModel):
    """fairseq's RoBERTa with BERT's LayerNorm epsilon and a segment-offset buffer for export;
    it serves every masked-LM objective of the plugin (:mod:`truneg_fairseq.models.objectives`)."""

    def __init__(self, args, encoder):
        super().__init__(args, encoder)
        set_layernorm_eps(self, args.bert_layernorm_eps)
        self.register_buffer(
            "bert_segment_offsets", torch.zeros(args.bert_type_vocab_size, args.encoder_embed_dim)
        )
        dim = args.encoder_embed_dim
        self.register_buffer("bert_pooler_weight", torch.zeros(dim, dim))
        self.register_buffer("bert_pooler_bias", torch.zeros(dim))
        if safe_getattr(args, "bert_freeze_encoder", False):
            frozen = 0
            for (
                p
            ) in self.encoder.sentence_encoder.parameters():  # the tied output projection with them
                p.requires_grad_(False)
                frozen += p.numel()
            trained = sum(p.numel() for p in self.parameters() if p.requires_grad)
            logger.info(
                f"--bert-freeze-encoder: {frozen} encoder parameters fixed, {trained} of the masked-LM "
                "head trained"
            )

    @staticmethod
    def add_args(parser):
        RobertaModel.add_args(parser)
        parser.add_argument(
            "--bert-layernorm-eps",
            type=float,
            metavar="EPS",
            help="epsilon of every LayerNorm (BERT: 1e-12)",
        )
        parser.add_argument(
            "--bert-type-vocab-size",
            type=int,
            metavar="N",
            help="rows of the token-type (segment) offsets kept for export (BERT: 2)",
        )
        parser.add_argument(
            "--bert-sizes-from",
            metavar="DIR",
            default=None,
            help="take every size left unset (layers, widths, heads, positions, LayerNorm eps, dropout, "
            "activation) from DIR/import.json, written by scripts/convert_hf.py import; read when the model is "
            "configured, so checkpoints hold the sizes themselves",
        )
        parser.add_argument(
            "--bert-freeze-encoder",
            action="store_true",
            default=False,
            help="train only the masked-LM head (dense, LayerNorm, output bias): the head warm-up of a model "
            "imported without one; the encoder and embeddings stay exactly as they are",
        )

    @classmethod
    def build_model(cls, args, task):
        bert_base_architecture(args)
        return super().build_model(args, task)

    def upgrade_state_dict_named(self, state_dict, name):
        prefix = name + "." if name else ""
        for buf in ("bert_segment_offsets", "bert_pooler_weight", "bert_pooler_bias"):
            if prefix + buf not in state_dict:
                # a RoBERTa checkpoint restored into a BERT model: nothing to keep
                state_dict[prefix + buf] = getattr(self, buf).clone()
        super().upgrade_state_dict_named(state_dict, name)


def _bert_arch(args, size: EncoderSize) -> None:
    """Sizes from ``--bert-sizes-from``, then ``size`` (one row of the sizes table), for whatever
    the command line left unset; then BERT's epsilon, activation and segment rows."""
    import_sizes.apply(args, "bert_sizes_from")
    encoder_sizes(args, size)
    args.bert_layernorm_eps = safe_getattr(args, "bert_layernorm_eps", 1e-12)
    args.bert_type_vocab_size = safe_getattr(args, "bert_type_vocab_size", 2)
    args.activation_fn = safe_getattr(args, "activation_fn", "gelu")  # erf GELU, as BERT's "gelu"
    args.pooler_activation_fn = safe_getattr(args, "pooler_activation_fn", "tanh")
    base_architecture(args)


@register_model_architecture("bert", "bert_hf_base")
def bert_base_architecture(args):
    _bert_arch(args, BERT_SIZES["base"])


@register_model_architecture("bert", "bert_hf")
def bert_hf_architecture(args):
    """Sizes from ``--bert-sizes-from`` (else BERT-base's)."""
    _bert_arch(args, BERT_SIZES["base"])


@register_model_architecture("bert", "bert_hf_large")
def bert_large_architecture(args):
    _bert_arch(args, BERT_SIZES["large"])


@register_model_architecture("bert", "bert_hf_tiny")
def bert_tiny_architecture(args):
    """2 layers of 32: for tests and smoke runs."""
    _bert_arch(args, BERT_SIZES["tiny"])
