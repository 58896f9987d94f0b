"""Batch-first transformer encoder layers and encoder over fairseq's parameters, attention by
``torch.nn.functional.scaled_dot_product_attention``.

fairseq's ``TransformerEncoderLayerBase`` is time-major and its ``MultiheadAttention`` spends
transposes, contiguous copies and the math path (bmm, softmax, dropout, bmm) on every layer;
its ``TransformerEncoder`` asks the device ``if has_pads`` once per layer, a host sync each.
The classes here keep fairseq's modules, parameters and checkpoint keys exactly
(``self_attn.{q,k,v,out}_proj``, ``self_attn_layer_norm``, ``fc1``, ``fc2``,
``final_layer_norm``), so every checkpoint and the HF conversion are unchanged; only the
forward differs: B x T x C throughout, one SDPA call per layer, no host syncs, no branch on a
tensor value.

* :class:`BatchFirstEncoderLayer`: the layer (ELECTRA's stacks, the plugin's RoBERTa/BERT).
* :class:`BatchFirstTransformerEncoder`: fairseq's ``TransformerEncoder`` with a batch-first
  forward over those layers and fairseq's return value (time-major ``encoder_out``).
* :class:`BatchFirstRoberta`: a mixin for ``RobertaModel`` subclasses that swaps their
  ``sentence_encoder`` for the batch-first one with the same weights.
"""

from typing import List, Optional

import torch
import torch.nn.functional as F
from fairseq.distributed import fsdp_wrap
from fairseq.models.transformer import TransformerConfig, TransformerEncoder
from fairseq.models.transformer.transformer_config import EncDecBaseConfig, QuantNoiseConfig
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor


def attention_mask(padding_mask: Optional[Tensor], dtype=torch.bool) -> Optional[Tensor]:
    """B x T bool padding mask (True at padding) -> B x 1 x 1 x T SDPA mask broadcast over heads
    and queries: bool (True where a key may be attended), or additive (-inf at padding) in a
    floating ``dtype``, which spares SDPA its bool-to-float conversion in every layer. None stays
    None (no padding: SDPA may then pick FlashAttention)."""
    if padding_mask is None:
        return None
    if dtype == torch.bool:
        return padding_mask.logical_not()[:, None, None, :]
    zeros = torch.zeros(padding_mask.shape, dtype=dtype, device=padding_mask.device)
    return zeros.masked_fill(padding_mask, float("-inf"))[:, None, None, :]


def mask_dtype(x: Tensor) -> torch.dtype:
    """The dtype attention computes in for activations ``x``: autocast's where it is on."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


def fresh_layer_config() -> TransformerConfig:
    """A ``TransformerConfig`` whose encoder and quant-noise groups belong to it: fairseq's
    ``TransformerConfig()`` holds the group classes themselves, so setting
    ``cfg.encoder.embed_dim`` on one would change every later default."""
    tc = TransformerConfig()
    tc.encoder = EncDecBaseConfig()
    tc.quant_noise = QuantNoiseConfig()
    return tc


def _dropout(x: Tensor, p: float, training: bool) -> Tensor:
    # torch.native_dropout is one operator on CPU and CUDA alike (F.dropout dispatches to it on
    # CUDA but to bernoulli_/div_/mul on CPU); p and training are host values, no sync
    if p > 0.0 and training:
        return torch.native_dropout(x, p, True)[0]
    return x


class BatchFirstEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer (same parameters, same keys) with a batch-first SDPA forward.

    Pre- or post-LayerNorm as ``cfg.encoder.normalize_before`` says, the activation of
    ``cfg.activation_fn``, and fairseq's dropout, attention dropout and activation dropout (their
    probabilities read from fairseq's modules at each call). Quantization noise and xformers
    attention are refused: use fairseq's layer for them."""

    # q, k and v's bf16 copies joined, while an update under --bf16 runs on copies of the
    # linear weights (training/bf16_weights.py); None: the layer joins its own weights
    truneg_joined_qkv = None

    def __init__(self, cfg, return_fc=False):
        if cfg.quant_noise.pq > 0:
            raise ValueError(
                "the batch-first encoder layer does not support quantization noise "
                "(--quant-noise-pq): train with fairseq's own roberta_* archs for it"
            )
        if cfg.encoder.xformers_att_config is not None:
            raise ValueError(
                "the batch-first encoder layer runs torch's scaled_dot_product_attention; "
                "drop --encoder-xformers-att-config"
            )
        super().__init__(cfg, return_fc=return_fc)
        self.num_heads = cfg.encoder.attention_heads

    def attention(self, x: Tensor, bsz: int, seq_len: int, sdpa_mask: Optional[Tensor]) -> Tensor:
        """N x C -> N x C self-attention (N = B * T, batch-major rows); ``sdpa_mask`` as
        :func:`attention_mask`."""
        attn = self.self_attn
        heads = self.num_heads
        # one projection for q, k and v (fairseq's three weights, joined for the call): one
        # matrix product, one autocast cast of x and one of its gradient instead of three each
        joined = self.truneg_joined_qkv
        if joined is not None:  # their bf16 copies, joined by the update (training/bf16_weights.py)
            weight, bias = joined
        else:
            q_proj, k_proj, v_proj = attn.q_proj, attn.k_proj, attn.v_proj
            weight = torch.cat([q_proj.weight, k_proj.weight, v_proj.weight])
            # fairseq's attention gives the three projections a bias or none (its ``bias`` flag)
            bias = (
                None if q_proj.bias is None else torch.cat([q_proj.bias, k_proj.bias, v_proj.bias])
            )
        # N x 3C -> 3 x B x H x T x D
        qkv = F.linear(x, weight, bias).view(bsz, seq_len, 3, heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if sdpa_mask is not None and sdpa_mask.dtype != torch.bool and sdpa_mask.dtype != q.dtype:
            sdpa_mask = sdpa_mask.to(q.dtype)  # an additive mask made for another dtype
        p = attn.dropout_module.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask, dropout_p=p)
        return attn.out_proj(y.transpose(1, 2).reshape(-1, x.shape[-1]))  # N x C

    def forward(
        self,
        x: Tensor,
        padding_mask: Optional[Tensor] = None,
        sdpa_mask: Optional[Tensor] = None,
    ):
        """x: B x T x C; padding_mask: B x T bool (True at padding) or None. ``sdpa_mask``, when
        given, is ``attention_mask(padding_mask)`` computed once by the caller for all layers
        (then ``padding_mask`` is not read). Returns B x T x C (and fc2's output before dropout
        with ``return_fc``)."""
        if sdpa_mask is None:
            sdpa_mask = attention_mask(padding_mask)
        bsz, seq_len, dim = x.shape
        # the layer works on N x C rows (N = B * T): linears on 2-D inputs are one addmm each
        x = x.reshape(-1, dim)
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x = self.attention(x, bsz, seq_len, sdpa_mask)
        x = residual + _dropout(x, self.dropout_module.p, self.training)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)

        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.activation_fn(self.fc1(x))
        x = _dropout(x, self.activation_dropout_module.p, self.training)
        fc_result = x = self.fc2(x)
        x = residual + _dropout(x, self.dropout_module.p, self.training)
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        x = x.view(bsz, seq_len, dim)  # B x T x C
        if self.return_fc:
            return x, fc_result.view(bsz, seq_len, dim)
        return x


class BatchFirstTransformerEncoder(TransformerEncoder):
    """fairseq's ``TransformerEncoder`` (same modules and keys) over
    :class:`BatchFirstEncoderLayer`: batch-first from the embeddings to the last layer, the
    padding mask always passed (no ``has_pads`` test on the host), layerdrop and the final
    LayerNorm as fairseq's. Returns fairseq's dict: ``encoder_out`` and ``encoder_states``
    time-major (T x B x C views of the batch-first tensors)."""

    def build_encoder_layer(self, args):
        cfg = TransformerConfig.from_namespace(args)
        layer = BatchFirstEncoderLayer(cfg, return_fc=self.return_fc)
        if cfg.checkpoint_activations:
            layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
            return fsdp_wrap(layer, min_num_params=0)
        return fsdp_wrap(layer, min_num_params=cfg.min_params_to_wrap)

    def forward_scriptable(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
    ):
        """src_tokens: B x T. See fairseq's ``TransformerEncoderBase.forward``."""
        padding_mask = src_tokens.eq(self.padding_idx)  # B x T
        x, encoder_embedding = self.forward_embedding(src_tokens, token_embeddings)
        x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0)  # B x T x C, padding zeroed
        sdpa_mask = attention_mask(padding_mask, mask_dtype(x))  # B x 1 x 1 x T, once

        states: List[Tensor] = [x] if return_all_hiddens else []
        fc_results: List[Optional[Tensor]] = []
        for layer in self.layers:  # fairseq's LayerDropModuleList samples layers in training
            out = layer(x, padding_mask, sdpa_mask)
            x, fc_result = out if isinstance(out, tuple) else (out, None)
            if return_all_hiddens:
                states.append(x)
                fc_results.append(fc_result)
        if self.layer_norm is not None:
            x = self.layer_norm(x)

        src_lengths = padding_mask.logical_not().sum(dim=1, dtype=torch.int32).reshape(-1, 1)
        return {
            "encoder_out": [x.transpose(0, 1)],  # T x B x C
            "encoder_padding_mask": [padding_mask],  # B x T
            "encoder_embedding": [encoder_embedding],  # B x T x C
            "encoder_states": [h.transpose(0, 1) for h in states],  # List[T x B x C]
            "fc_results": [r.transpose(0, 1) if r is not None else None for r in fc_results],
            "src_tokens": [],
            "src_lengths": [src_lengths],  # B x 1
        }


def batch_first_encoder(encoder: TransformerEncoder) -> BatchFirstTransformerEncoder:
    """The batch-first encoder with ``encoder``'s weights and its token embedding module (so an
    LM head tied to it stays tied). Torch's random state is left as it was, so a model built
    this way starts from the weights fairseq's build would give and draws the same numbers
    afterwards."""
    if isinstance(encoder, BatchFirstTransformerEncoder):
        return encoder
    with torch.random.fork_rng(devices=[]):
        new = BatchFirstTransformerEncoder(
            encoder.args, encoder.dictionary, encoder.embed_tokens, return_fc=encoder.return_fc
        )
    new.load_state_dict(encoder.state_dict(), strict=True)
    return new.train(encoder.training)


class BatchFirstRoberta:
    """Mixin for ``RobertaModel`` subclasses: the ``RobertaEncoder``'s ``sentence_encoder``
    becomes :class:`BatchFirstTransformerEncoder` (same weights and keys) before the model
    takes the encoder."""

    def __init__(self, args, encoder):
        encoder.sentence_encoder = batch_first_encoder(encoder.sentence_encoder)
        super().__init__(args, encoder)
