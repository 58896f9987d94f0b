"""The one place where criterions reach a model: the masked-LM network and, when there is one,
the replaced-token discriminator.

A criterion calls :func:`mlm_access` once per step and uses only these named methods:

* ``mlm_logits(src_tokens, masked_tokens)`` -> M x V logits at the M masked positions
  (B x T x V when ``masked_tokens`` is None);
* ``mlm_logits_at(src_tokens, positions)`` -> B x N x V logits at N given positions per row
  (a B x N index tensor: static shapes, no boolean indexing);
* ``mlm_features(tokens)`` -> B x T x C final-layer features of the masked-LM network (for
  ELECTRA the generator, never the discriminator);
* ``input_embeddings()`` -> V x C input token embedding matrix (the tensor itself, so gradient
  reaches it);
* ``has_discriminator`` and, when True, ``sample_replacements(logits)`` (M ids, no gradient)
  and ``discriminator_logits(tokens)`` (B x T, > 0 means "replaced").

Models that define these methods themselves (the plugin's ELECTRA, BERT and CLINE models) are
returned as they are; fairseq's RoBERTa (and any subclass) gets a thin adapter. Anything else is
refused with a message that names the model class and the architectures that work.
"""

from typing import Optional

import torch
from fairseq.models.roberta import RobertaModel

MLM_METHODS = ("mlm_logits", "mlm_logits_at", "mlm_features", "input_embeddings")


def gather_positions(features: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """features B x T x C, positions B x N -> B x N x C."""
    return features.gather(1, positions.unsqueeze(-1).expand(-1, -1, features.size(-1)))


class RobertaAccess:
    """Adapter over fairseq's ``RobertaModel``: the interface above, no discriminator."""

    has_discriminator = False

    def __init__(self, model: RobertaModel):
        self.model = model

    def mlm_logits(self, src_tokens: torch.Tensor, masked_tokens: Optional[torch.Tensor]) -> torch.Tensor:
        return self.model(src_tokens, masked_tokens=masked_tokens)[0]

    def mlm_logits_at(self, src_tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = gather_positions(self.mlm_features(src_tokens), positions)  # B x N x C
        return self.model.encoder.lm_head(x)  # B x N x V

    def mlm_features(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens, features_only=True)[0]

    def input_embeddings(self) -> torch.Tensor:
        return self.model.encoder.sentence_encoder.embed_tokens.weight


def provides_mlm(model_or_class) -> bool:
    """True when the model (or model class) can be driven by the masked-LM criterions."""
    cls = model_or_class if isinstance(model_or_class, type) else type(model_or_class)
    return issubclass(cls, RobertaModel) or all(callable(getattr(cls, m, None)) for m in MLM_METHODS)


DDP_BACKEND_MESSAGE = (
    "the plugin's criterions reach the model through named methods (masked-LM logits, features, "
    "discriminator), which torch's DistributedDataParallel (fairseq's --ddp-backend pytorch_ddp/c10d, "
    "the default) does not see: it would not sum the gradients over workers. Train with "
    "--ddp-backend legacy_ddp (fairseq all-reduces the gradients after the backward pass)"
)


def unwrap_data_parallel(model):
    """The model inside fairseq's data-parallel wrappers (``ModuleProxyWrapper`` around
    ``LegacyDistributedDataParallel``), which multi-worker training hands to the criterion; a
    model that is not wrapped is returned as it is. torch's ``DistributedDataParallel`` is
    refused (:data:`DDP_BACKEND_MESSAGE`): it sums gradients only of what runs through its own
    ``forward``."""
    from fairseq.distributed import LegacyDistributedDataParallel, ModuleProxyWrapper
    from torch.nn.parallel import DistributedDataParallel

    while isinstance(model, (ModuleProxyWrapper, LegacyDistributedDataParallel, DistributedDataParallel)):
        if isinstance(model, DistributedDataParallel):
            raise ValueError(DDP_BACKEND_MESSAGE)
        model = model.module
    return model


def mlm_access(model, criterion: str = "this criterion"):
    """The model itself when it implements the interface, an adapter for fairseq's RoBERTa.

    Under fairseq's ``legacy_ddp`` wrapper the wrapped model is used: the wrapper sums the
    gradients over workers after the backward pass, whatever method computed them."""
    model = unwrap_data_parallel(model)
    if all(callable(getattr(model, m, None)) for m in MLM_METHODS):
        return model
    if isinstance(model, RobertaModel):
        return RobertaAccess(model)
    raise ValueError(mismatch_message(criterion, type(model).__name__))


def mismatch_message(criterion: str, model_name: str) -> str:
    return (
        f"--criterion {criterion} needs a masked-LM model (fairseq's roberta_* archs with --task "
        f"masked_lm, this plugin's bert_* archs, or its electra_* archs with --task electra); got "
        f"{model_name}"
    )


def encoder_sizes(args, layers: int, dim: int, ffn: int, heads: int, max_positions=None) -> None:
    """Fill a RoBERTa-style arch's encoder sizes where the command line left them unset."""
    from fairseq.utils import safe_getattr

    args.encoder_layers = safe_getattr(args, "encoder_layers", layers)
    args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", dim)
    args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", ffn)
    args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", heads)
    if max_positions is not None:
        args.max_positions = safe_getattr(args, "max_positions", max_positions)

