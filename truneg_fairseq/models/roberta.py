"""fairseq's RoBERTa with the objectives' pass (:mod:`truneg_fairseq.models.objectives`).

``--arch truneg_roberta_base`` (``_large``, ``_tiny``) is fairseq's ``roberta_base`` (``_large``)
in every weight, size default and checkpoint key: a checkpoint moves between the two archs
unchanged (``--restore-file``, fine-tuning with fairseq's ``sentence_prediction``), and
fairseq's published ``roberta.base`` continues here. What it adds is the forward that soft
regularization and sentence-level KL need: the input-embedding rows of the gold and predicted
tokens, and the encodings of the prediction-filled and original sentences, computed in the
same call as the masked-LM logits so that torch's DistributedDataParallel synchronises them.
"""

from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaModel, base_architecture, roberta_large_architecture
from fairseq.utils import safe_getattr

from truneg_fairseq.models import embed_init
from truneg_fairseq.models.encoder_layer import BatchFirstRoberta
from truneg_fairseq.models.objectives import MaskedLMObjectives
from truneg_fairseq.models.sizes import BERT_SIZES, EncoderSize
from truneg_fairseq.models.update_hooks import UpdateHooks


class RobertaObjectives(MaskedLMObjectives):
    """The pass on a fairseq RoBERTa encoder (its ``lm_head`` is tied to the token embedding)."""

    def mlm_encode(self, tokens):
        return self.encoder.extract_features(tokens)[0]  # B x T x C

    def mlm_project(self, features):
        return self.encoder.lm_head(features)  # ... x V

    def mlm_embedding_matrix(self):
        return self.encoder.sentence_encoder.embed_tokens.weight  # V x C

    def mlm_padding_idx(self):
        return self.encoder.sentence_encoder.padding_idx


@register_model("truneg_roberta")
class TrunegRobertaModel(BatchFirstRoberta, UpdateHooks, RobertaObjectives, RobertaModel):
    """fairseq's RoBERTa, serving every masked-LM objective of the plugin."""

    @staticmethod
    def add_args(parser):
        RobertaModel.add_args(parser)
        parser.add_argument(
            "--truneg-embed-init", metavar="FILE", default=None, help=embed_init.HELP
        )

    @classmethod
    def build_model(cls, args, task):
        roberta_base_architecture(args)
        model = super().build_model(args, task)
        path = safe_getattr(args, "truneg_embed_init", None)
        if path:
            embed_init.load_rows(model.encoder.sentence_encoder.embed_tokens.weight, path)
            embed_init.forget(args, "truneg_embed_init")
        return model


def encoder_sizes(args, size: EncoderSize) -> None:
    """Fill a RoBERTa-style arch's encoder sizes where the command line left them unset."""
    args.encoder_layers = safe_getattr(args, "encoder_layers", size.layers)
    args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", size.dim)
    args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", size.ffn)
    args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", size.heads)
    args.max_positions = safe_getattr(args, "max_positions", size.max_positions)


@register_model_architecture("truneg_roberta", "truneg_roberta_base")
def roberta_base_architecture(args):
    base_architecture(args)


@register_model_architecture("truneg_roberta", "truneg_roberta_large")
def roberta_large_architecture_(args):
    roberta_large_architecture(args)


@register_model_architecture("truneg_roberta", "truneg_roberta_tiny")
def roberta_tiny_architecture(args):
    """2 layers of 32: for tests and smoke runs."""
    encoder_sizes(args, BERT_SIZES["tiny"])
    base_architecture(args)
