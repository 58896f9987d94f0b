"""``BertForMaskedLM``/``BertForPreTraining``/``BertModel`` as the plugin's ``bert`` model
(fairseq's RoBERTa with BERT's LayerNorm epsilon, models/bert.py); a source without a
masked-LM head gets a fresh one so that pre-training can continue."""

import logging
from pathlib import Path
from typing import Dict

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
    BERT_MLM_HEAD,
    BERT_POOLER,
    HF_TO_FAIRSEQ_ACT,
    _has,
    _hf_to_fairseq,
    _take,
)
from truneg_fairseq.text import wordpiece_row_order

logger = logging.getLogger(__name__)


DECODER = "cls.predictions.decoder.weight"


def untied_decoder(ck: HFCheckpoint) -> bool:
    """Whether ``ck`` is a masked-LM head whose output projection is its own tensor: config.json
    says ``tie_word_embeddings: false`` and the weights hold the decoder (``transformers`` then
    keeps it apart from the word embeddings, so the import must too)."""
    return ck.config.get("tie_word_embeddings", True) is False and DECODER in ck.state


def _bert_sizes(c: dict, max_positions: int, untied: bool = False) -> Dict[str, object]:
    return {
        "untie_weights_roberta": untied,
        "encoder_layers": int(c["num_hidden_layers"]),
        "encoder_embed_dim": int(c["hidden_size"]),
        "encoder_ffn_embed_dim": int(c["intermediate_size"]),
        "encoder_attention_heads": int(c["num_attention_heads"]),
        "max_positions": max_positions,
        "tokens_per_sample": max_positions,
        "activation_fn": HF_TO_FAIRSEQ_ACT[c.get("hidden_act", "gelu")],
        "dropout": float(c.get("hidden_dropout_prob", 0.1)),
        "attention_dropout": float(c.get("attention_probs_dropout_prob", 0.1)),
        "bert_layernorm_eps": float(c.get("layer_norm_eps", 1e-12)),
        "bert_type_vocab_size": int(c.get("type_vocab_size", 2)),
    }


def _import_bert(ck: HFCheckpoint, work: Path, seed: int = 1):
    c, s, where = ck.config, ck.state, str(ck.path)
    base = "bert." if any(k.startswith("bert.") for k in s) else ""
    rows = _take(s, base + "embeddings.word_embeddings.weight", where).size(0)
    check_vocab_size(ck, rows)
    order = wordpiece_row_order(ck.vocab)
    max_positions = _take(s, base + "embeddings.position_embeddings.weight", where).size(0)
    untied = untied_decoder(ck)
    cfg, task, model = build_fairseq(
        "masked_lm", "bert_hf", _bert_sizes(c, max_positions, untied), work
    )
    pad = task.source_dictionary.pad()
    emb = embedding_tensors(s, base + "embeddings.", order, pad, where)
    enc = "encoder.sentence_encoder."
    out = {
        enc + "embed_tokens.weight": emb["tokens"],
        enc + "embed_positions.weight": emb["positions"],
        enc + "layernorm_embedding.weight": emb["ln_w"],
        enc + "layernorm_embedding.bias": emb["ln_b"],
        "bert_segment_offsets": emb["segment_offsets"],
        "encoder.lm_head.weight": emb["tokens"],
    }
    out.update(
        layer_tensors(s, base + "encoder.layer.", enc + "layers.", c["num_hidden_layers"], where)
    )
    if _has(s, BERT_MLM_HEAD):
        head = "cls.predictions."
        # the decoder's own bias is what transformers adds when the head is untied (tied, the
        # two names are one tensor)
        first = "decoder.bias" if untied else "bias"
        bias_key = head + first if head + first in s else head + "decoder.bias"
        out.update(_hf_to_fairseq(s, BERT_MLM_HEAD, where))
        out["encoder.lm_head.bias"] = _take(s, bias_key, where)[order]
        if untied:  # the output projection as its own parameter, rows in fairseq's order
            out["encoder.lm_head.weight"] = _take(s, DECODER, where)[order]
            logger.info(
                f"{ck.path}: tie_word_embeddings is false; the masked-LM output projection is "
                "imported as its own tensor (--untie-weights-roberta)"
            )
        else:  # transformers ties it to the word embeddings, whatever the file holds
            warn_untied(
                s,
                DECODER,
                _take(s, base + "embeddings.word_embeddings.weight", where),
                "MLM decoder",
            )
    else:
        out.update(
            fresh_mlm_head(
                model.args.encoder_embed_dim,
                len(task.source_dictionary),
                float(c.get("initializer_range") or 0.02),
                seed,
            )
        )
        logger.warning(
            f"{ck.arch} in {ck.path} has no masked-LM head: the head (dense, LayerNorm, output bias) starts "
            f"from a fresh initialisation (seed {seed}, as transformers initialises BertLMPredictionHead); the "
            "output projection is tied to the imported word embeddings. Warm the head up with the encoder frozen "
            "before continued pre-training (--bert-freeze-encoder; examples/bert/pretrain.sh does it)"
        )
    if _has(s, BERT_POOLER, base):
        out.update(_hf_to_fairseq(s, BERT_POOLER, where, hf_base=base))
    dropped = sorted({k.rsplit(".", 1)[0] for k in s if k.startswith("cls.seq_relationship.")})
    if dropped:
        logger.info(f"not imported (no counterpart in the fairseq model): {', '.join(dropped)}")
    fill_model(model, out)
    return cfg, model


def fresh_mlm_head(dim: int, vocab: int, std: float, seed: int) -> Dict[str, torch.Tensor]:
    """A masked-LM head initialised as transformers initialises ``BertLMPredictionHead`` (dense
    weight ~ N(0, initializer_range), zero biases, LayerNorm 1/0), from ``seed`` alone: two
    imports of the same model give the same head."""
    gen = torch.Generator().manual_seed(seed)
    (_, dense), (_, norm) = BERT_MLM_HEAD
    return {
        dense + "weight": torch.randn(dim, dim, generator=gen) * std,
        dense + "bias": torch.zeros(dim),
        norm + "weight": torch.ones(dim),
        norm + "bias": torch.zeros(dim),
        "encoder.lm_head.bias": torch.zeros(vocab),
    }
