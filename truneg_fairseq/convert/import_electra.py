"""``ElectraForPreTraining`` (+ a generator directory holding ``ElectraForMaskedLM``) as the
plugin's ``electra`` model, embeddings shared by both networks; the pair is checked to be one
that can share them."""

import logging
from pathlib import Path
from typing import Dict, Optional

import torch

from truneg_fairseq.convert.build import (
    build_fairseq,
    check_vocab_size,
    embedding_tensors,
    fill_model,
    layer_tensors,
    warn_untied,
)
from truneg_fairseq.convert.hf_dir import HFCheckpoint
from truneg_fairseq.convert.keys import (
    DISCRIMINATOR_HEAD,
    ELECTRA_PROJECTION,
    GENERATOR_HEAD,
    _has,
    _hf_to_fairseq,
    _take,
)
from truneg_fairseq.errors import ConversionError
from truneg_fairseq.models.sizes import ELECTRA_SIZES, PUBLISHED_ELECTRA
from truneg_fairseq.text import wordpiece_row_order

logger = logging.getLogger(__name__)


def generator_sizes(hidden: int) -> Dict[str, int]:
    """The generator of a discriminator published without one, sized as the published pairs are
    (:data:`~truneg_fairseq.models.sizes.ELECTRA_SIZES`): the published generator for a published
    width, else a quarter of the discriminator's width, heads of 64, FFN 4 x hidden; as many
    layers as the discriminator."""
    for name in PUBLISHED_ELECTRA:
        size = ELECTRA_SIZES[name]
        if size.hidden == hidden:
            return {
                "hidden_size": size.gen_hidden,
                "num_attention_heads": size.gen_heads,
                "intermediate_size": size.gen_ffn,
            }
    gen_hidden = max(hidden // 4, 1)
    return {
        "hidden_size": gen_hidden,
        "num_attention_heads": max(gen_hidden // 64, 1),
        "intermediate_size": 4 * gen_hidden,
    }


def _electra_sizes(d: dict, g: Optional[dict], max_positions: int) -> Dict[str, object]:
    # a discriminator alone: the generator that pre-training adds (fresh, warmed up first)
    gen = g or dict(
        generator_sizes(int(d["hidden_size"])), num_hidden_layers=d["num_hidden_layers"]
    )
    return {
        "electra_embed_dim": int(d.get("embedding_size", d["hidden_size"])),
        "electra_hidden_dim": int(d["hidden_size"]),
        "electra_layers": int(d["num_hidden_layers"]),
        "electra_heads": int(d["num_attention_heads"]),
        "electra_ffn_dim": int(d["intermediate_size"]),
        "electra_gen_hidden_dim": int(gen["hidden_size"]),
        "electra_gen_layers": int(gen["num_hidden_layers"]),
        "electra_gen_heads": int(gen["num_attention_heads"]),
        "electra_gen_ffn_dim": int(gen["intermediate_size"]),
        "electra_max_positions": max_positions,
        "tokens_per_sample": max_positions,
        "electra_dropout": float(d.get("hidden_dropout_prob", 0.1)),
        "electra_attention_dropout": float(d.get("attention_probs_dropout_prob", 0.1)),
        "electra_layernorm_eps": float(d.get("layer_norm_eps", 1e-12)),
        "electra_discriminator_only": g is None,
    }


def _check_pair(
    ck: HFCheckpoint,
    gen: HFCheckpoint,
    words: torch.Tensor,
    pos: torch.Tensor,
    allow_unshared: bool,
) -> None:
    """A generator and a discriminator that ELECTRA can share embeddings between: the same
    embedding and position sizes, the same vocabulary and (unless ``allow_unshared``) the same
    embedding values."""
    gw = _take(gen.state, "electra.embeddings.word_embeddings.weight", str(gen.path))
    gp = _take(gen.state, "electra.embeddings.position_embeddings.weight", str(gen.path))
    if gw.shape != words.shape or gp.shape != pos.shape:
        raise ConversionError(
            f"the generator in {gen.path} has embeddings {tuple(gw.shape)} / positions {tuple(gp.shape)}, the "
            f"discriminator in {ck.path} {tuple(words.shape)} / {tuple(pos.shape)}: ELECTRA shares them, so "
            "the sizes (embedding_size, vocab_size, max_position_embeddings) must match; give the generator "
            "published with this discriminator"
        )
    if gen.vocab is not None and gen.vocab != ck.vocab:
        raise ConversionError(
            f"the generator's vocabulary in {gen.path} differs from the discriminator's in {ck.path}"
        )
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm"):
        for p in ("weight",) if name != "LayerNorm" else ("weight", "bias"):
            key = f"electra.embeddings.{name}.{p}"
            if key in gen.state and gen.state[key].shape == ck.state[key].shape:
                diff = (gen.state[key].float() - ck.state[key].float()).abs().max().item()
                if diff > 0 and not allow_unshared:
                    raise ConversionError(
                        f"the generator in {gen.path} and the discriminator in {ck.path} differ in {key} (max "
                        f"{diff:.3g}): ELECTRA shares its embeddings, so these are not a published pair. Give the "
                        "generator released with this discriminator, or pass --allow-unshared-embeddings to "
                        "import anyway with the discriminator's embeddings (the generator is then not the "
                        "published one)"
                    )
                if diff > 0:
                    logger.warning(
                        f"generator and discriminator differ in {key} (max {diff:.3g}); the "
                        "imported model shares the discriminator's embeddings"
                    )


def _import_electra(
    ck: HFCheckpoint, gen: Optional[HFCheckpoint], work: Path, allow_unshared: bool = False
):
    d, s, where = ck.config, ck.state, str(ck.path)
    for cfg_ in (d, gen.config if gen else {}):
        if cfg_.get("hidden_act", "gelu") != "gelu":
            raise ConversionError(
                f"ELECTRA with hidden_act {cfg_['hidden_act']!r}: only 'gelu' (erf) is supported"
            )
    words = _take(s, "electra.embeddings.word_embeddings.weight", where)
    check_vocab_size(ck, words.size(0))
    order = wordpiece_row_order(ck.vocab)
    pos = _take(s, "electra.embeddings.position_embeddings.weight", where)
    if gen is not None:
        _check_pair(ck, gen, words, pos, allow_unshared)
    cfg, task, model = build_fairseq(
        "electra", "electra_base", _electra_sizes(d, gen.config if gen else None, pos.size(0)), work
    )
    pad = task.source_dictionary.pad()
    emb = embedding_tensors(s, "electra.embeddings.", order, pad, where)
    out = {
        "embeddings.embed_tokens.weight": emb["tokens"],
        "embeddings.embed_positions.weight": emb["positions"],
        "embeddings.layer_norm.weight": emb["ln_w"],
        "embeddings.layer_norm.bias": emb["ln_b"],
        **_hf_to_fairseq(s, DISCRIMINATOR_HEAD, where),
    }
    if emb["segment_offsets"].abs().max() > 0:
        logger.info(
            "ELECTRA in the plugin feeds one segment: token-type row 0 is folded into the positions, "
            "the other rows are not kept"
        )
    out.update(_stack(s, "discriminator.", d, where))
    if gen is not None:
        gs, gwhere = gen.state, str(gen.path)
        if (
            gen.config.get("tie_word_embeddings", True) is False
            and "generator_lm_head.weight" in gs
        ):
            raise ConversionError(
                f"{gen.path}/config.json: tie_word_embeddings is false, so the generator's output "
                "projection (generator_lm_head.weight) is not the word embeddings; the plugin's "
                "ELECTRA ties them and cannot hold it. Give a generator with tied embeddings"
            )
        out.update(_stack(gs, "generator.", gen.config, gwhere))
        out.update(_hf_to_fairseq(gs, GENERATOR_HEAD, gwhere))
        out["generator_bias"] = _take(gs, "generator_lm_head.bias", gwhere)[order]
        warn_untied(gs, "generator_lm_head.weight", words, "generator output")
    else:
        logger.warning(
            f"no --generator given: {ck.path} is imported as a discriminator alone; it fine-tunes "
            "(sentence_prediction, squad) as it is, and ELECTRA pre-training adds a fresh generator, warmed up "
            "first with the discriminator frozen (--electra-freeze-discriminator; examples/electra/pretrain.sh does it)"
        )
    fill_model(model, out)
    return cfg, model


def _stack(state, fs_prefix: str, config: dict, where: str) -> Dict[str, torch.Tensor]:
    out = layer_tensors(
        state, "electra.encoder.layer.", fs_prefix + "layers.", config["num_hidden_layers"], where
    )
    if _has(state, ELECTRA_PROJECTION):
        out.update(_hf_to_fairseq(state, ELECTRA_PROJECTION, where, fs_base=fs_prefix))
    return out
