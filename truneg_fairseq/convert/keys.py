"""How HuggingFace tensor names map to the plugin's fairseq names: one table per part, read in
both directions, so that import and export cannot disagree on a name."""

from typing import Dict, Tuple

import torch

from truneg_fairseq.errors import ConversionError

# HF hidden_act -> fairseq activation_fn (erf GELU is "gelu" in both)
HF_TO_FAIRSEQ_ACT = {
    "gelu": "gelu",
    "gelu_new": "gelu_accurate",
    "gelu_pytorch_tanh": "gelu_accurate",
    "relu": "relu",
}
FAIRSEQ_TO_HF_ACT = {
    "gelu": "gelu",
    "gelu_accurate": "gelu_new",
    "gelu_fast": "gelu_new",
    "relu": "relu",
}

# one transformer layer: HF suffix -> fairseq TransformerEncoderLayerBase suffix
LAYER_MAP = (
    ("attention.self.query.", "self_attn.q_proj."),
    ("attention.self.key.", "self_attn.k_proj."),
    ("attention.self.value.", "self_attn.v_proj."),
    ("attention.output.dense.", "self_attn.out_proj."),
    ("attention.output.LayerNorm.", "self_attn_layer_norm."),
    ("intermediate.dense.", "fc1."),
    ("output.dense.", "fc2."),
    ("output.LayerNorm.", "final_layer_norm."),
)


# (HuggingFace prefix, fairseq prefix) pairs, each naming a ``weight`` and a ``bias``: one table per
# part, read in both directions (import: HF -> fairseq, export: fairseq -> HF)
KeyTable = Tuple[Tuple[str, str], ...]
DISCRIMINATOR_HEAD: KeyTable = (
    ("discriminator_predictions.dense.", "discriminator_head.dense."),
    ("discriminator_predictions.dense_prediction.", "discriminator_head.out_proj."),
)
GENERATOR_HEAD: KeyTable = (
    ("generator_predictions.dense.", "generator_head.dense."),
    ("generator_predictions.LayerNorm.", "generator_head.layer_norm."),
)
BERT_MLM_HEAD: KeyTable = (
    ("cls.predictions.transform.dense.", "encoder.lm_head.dense."),
    ("cls.predictions.transform.LayerNorm.", "encoder.lm_head.layer_norm."),
)
ROBERTA_MLM_HEAD: KeyTable = (
    ("lm_head.dense.", "encoder.lm_head.dense."),
    ("lm_head.layer_norm.", "encoder.lm_head.layer_norm."),
)
BERT_POOLER: KeyTable = (
    ("pooler.dense.", "bert_pooler_"),
)  # HF side under the model's base prefix
ELECTRA_PROJECTION: KeyTable = (
    ("electra.embeddings_project.", "project."),
)  # fairseq side under the stack's prefix


def _hf_to_fairseq(
    state, table: KeyTable, where: str, hf_base: str = "", fs_base: str = ""
) -> Dict[str, torch.Tensor]:
    return {
        fs_base + fs + p: _take(state, hf_base + hf + p, where)
        for hf, fs in table
        for p in ("weight", "bias")
    }


def _fairseq_to_hf(
    state, table: KeyTable, hf_base: str = "", fs_base: str = ""
) -> Dict[str, torch.Tensor]:
    return {
        hf_base + hf + p: state[fs_base + fs + p] for hf, fs in table for p in ("weight", "bias")
    }


def _has(state, table: KeyTable, hf_base: str = "") -> bool:
    """``state`` (HF keys) holds the part that ``table`` maps."""
    return hf_base + table[0][0] + "weight" in state


def _layer_table(hf_prefix: str, fs_prefix: str, n: int) -> KeyTable:
    """(HF prefix, fairseq prefix) of every tensor of ``n`` transformer layers."""
    return tuple(
        (f"{hf_prefix}{i}.{hf}", f"{fs_prefix}{i}.{fs}") for i in range(n) for hf, fs in LAYER_MAP
    )


def _take(state: Dict[str, torch.Tensor], key: str, where: str) -> torch.Tensor:
    if key not in state:
        raise ConversionError(
            f"{where} lacks the tensor {key}: the weights do not match config.json's architecture"
        )
    return state[key].float()
