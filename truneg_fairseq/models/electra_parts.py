"""ELECTRA's building blocks: the shared embeddings, the discriminator and generator heads and
the encoder stack of fairseq's own transformer layers. Apart from the model
(:mod:`truneg_fairseq.models.electra`) because CLINE's models reuse the heads on other encoders,
and the blocks need nothing of the model's construction, pre-training or checkpoint handling.
Module and parameter names here are checkpoint keys: keep them.
"""

import torch
import torch.nn as nn
from fairseq import utils
from fairseq.models.transformer import TransformerConfig
from fairseq.modules import LayerNorm, PositionalEmbedding

from truneg_fairseq.models.encoder_layer import (
    BatchFirstEncoderLayer,
    attention_mask,
    fresh_layer_config,
    mask_dtype,
)


def _layer_config(hidden, heads, ffn, cfg) -> TransformerConfig:
    """The fairseq layer config of one stack; ``cfg`` is the model's :class:`ElectraConfig`
    (dropouts, activation)."""
    tc = fresh_layer_config()
    tc.encoder.embed_dim = hidden
    tc.encoder.attention_heads = heads
    tc.encoder.ffn_embed_dim = ffn
    tc.encoder.normalize_before = False  # post-LN, as BERT/ELECTRA
    tc.dropout = cfg.electra_dropout
    tc.attention_dropout = cfg.electra_attention_dropout
    tc.activation_dropout = 0.0
    tc.activation_fn = cfg.electra_activation_fn
    return tc


class ElectraEmbeddings(nn.Module):
    """Token + learned position embeddings, LayerNorm, dropout: B x T -> B x T x E."""

    def __init__(self, vocab_size, embed_dim, padding_idx, max_positions, dropout):
        super().__init__()
        self.padding_idx = padding_idx
        self.embed_tokens = nn.Embedding(vocab_size, embed_dim, padding_idx)
        self.embed_positions = PositionalEmbedding(
            max_positions, embed_dim, padding_idx, learned=True
        )
        self.layer_norm = LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens):
        x = self.embed_tokens(tokens) + self.embed_positions(tokens)  # B x T x E
        return self.dropout(self.layer_norm(x))


class ElectraDiscriminatorHead(nn.Module):
    """Replaced-token detection: dense -> activation (-> LayerNorm) -> one logit per token
    (... x H -> ...). ELECTRA's head has no LayerNorm; CLINE's RTD head on a RoBERTa/BERT encoder
    has one (``layer_norm=True``)."""

    def __init__(self, hidden: int, activation_fn: str, layer_norm: bool = False):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.layer_norm = LayerNorm(hidden) if layer_norm else None
        self.out_proj = nn.Linear(hidden, 1)
        self.out_proj.truneg_fp32 = True  # runs outside autocast (below): no bf16 weight copy

    def forward(self, x):
        x = self.activation_fn(self.dense(x))
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        # The logit projection runs in its weights' dtype, outside autocast: fp32 under fp16
        # autocast (--amp). Early in training the replaced-token-detection gradient has one sign
        # at most tokens, and out_proj's bias and weight gradients are sums over all B x T
        # tokens: 43,700 (before any loss scale) for the bias of ELECTRA-small at 128 x 128,
        # which fp16 (largest value 65,504) cannot hold at any loss scale of 2 or more. Under
        # fairseq's --fp16 the weights are fp16 and it stays fp16; in fp32 nothing changes.
        dtype = self.out_proj.weight.dtype
        with torch.autocast(x.device.type, enabled=False):
            return self.out_proj(x.to(dtype)).squeeze(-1)


class ElectraGeneratorHead(nn.Module):
    """Masked-LM transform: dense (H_gen -> E) -> activation -> LayerNorm; the output projection
    is the (tied) token embedding, applied by the model."""

    def __init__(self, hidden: int, embed_dim: int, activation_fn: str):
        super().__init__()
        self.dense = nn.Linear(hidden, embed_dim)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.layer_norm = LayerNorm(embed_dim)

    def forward(self, x):
        return self.layer_norm(self.activation_fn(self.dense(x)))


class ElectraStack(nn.Module):
    """Projection from the shared embedding size plus fairseq's transformer encoder layers, run
    batch-first with SDPA attention (:class:`BatchFirstEncoderLayer`, fairseq's parameters and
    keys)."""

    def __init__(self, embed_dim, hidden, layers, heads, ffn, cfg):
        super().__init__()
        self.project = nn.Linear(embed_dim, hidden) if embed_dim != hidden else None
        tc = _layer_config(hidden, heads, ffn, cfg)
        self.layers = nn.ModuleList([BatchFirstEncoderLayer(tc) for _ in range(layers)])

    def forward(self, x, padding_mask, return_all_hiddens: bool = False):
        """x: B x T x E embeddings, padding_mask: B x T bool, or None for a batch without padding
        (attention then runs without a mask, which lets SDPA pick its FlashAttention kernel)
        -> B x T x H features (with ``return_all_hiddens``: a list of L + 1 of them, the
        projected embeddings first)."""
        if self.project is not None:
            x = self.project(x)  # B x T x H
        if padding_mask is not None:
            x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0)
        sdpa_mask = attention_mask(padding_mask, mask_dtype(x))  # B x 1 x 1 x T, once
        states = [x] if return_all_hiddens else None
        for layer in self.layers:
            x = layer(x, padding_mask, sdpa_mask)  # B x T x H
            if states is not None:
                states.append(x)
        return states if states is not None else x
