"""The values a model config read from a file may hold (:func:`check_model_values`): one schema
of every field the plugin's model families are built from (:data:`SCHEMA`: ints with ranges,
floats with ranges, the activation functions fairseq knows, bools, local paths), applied to the
model config of every checkpoint of those families that fairseq or the plugin reads
(``checkpoint_utils.load_checkpoint_to_cpu``: the inference loader, the hub, the GLUE/SQuAD/ELECTRA
recipes' size flags, ``--restore-file``) and to the sizes an import records (``import.json``).

A value of another type, outside its range or not one of its choices (``activation_fn`` set to
``"--user-dir=DIR"``, a newline, a size of 10**9) is one :class:`ModelValueError` naming the file,
the field and the value, before anything turns it into a command-line flag or a model. Every
size is also bounded by the weights the file holds (:func:`check_against_weights`): a layer
count by the layers its tensor names number, a width, head count or position count by the
largest dimension of its tensors, so a config claiming a million layers fails in a second instead
of allocating them. Tokenizer settings read from a file must name local files
(:mod:`.encoder_files`, which uses :func:`is_url`): nothing is downloaded.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Dict, Mapping, Optional

from truneg_fairseq.errors import (
    ModelValueError,  # noqa: F401  (defined in the one place of the errors)
)

LAYERS, WIDTH, HEADS, POSITIONS = (1, 1024), (1, 1 << 18), (1, 4096), (1, 1 << 20)
_FRACTION = (0.0, 1.0)

# field -> ("int", (lo, hi)) | ("float", (lo, hi)) | ("bool", None) | ("choice", "activation")
#          | ("path", None) | ("int_list", None); None (unset) is accepted for every field
SCHEMA: Dict[str, tuple] = {
    # fairseq's RoBERTa and the plugin's BERT/CLINE on it
    "encoder_layers": ("int", LAYERS),
    "encoder_embed_dim": ("int", WIDTH),
    "encoder_ffn_embed_dim": ("int", WIDTH),
    "encoder_attention_heads": ("int", HEADS),
    "max_positions": ("int", POSITIONS),
    "activation_fn": ("choice", "activation"),
    "pooler_activation_fn": ("choice", "activation"),
    "dropout": ("float", _FRACTION),
    "attention_dropout": ("float", _FRACTION),
    "activation_dropout": ("float", _FRACTION),
    "pooler_dropout": ("float", _FRACTION),
    "encoder_layerdrop": ("float", _FRACTION),
    "encoder_layers_to_keep": ("int_list", None),
    "encoder_normalize_before": ("bool", None),
    "layernorm_embedding": ("bool", None),
    "load_checkpoint_heads": ("bool", None),
    "untie_weights_roberta": ("bool", None),
    "spectral_norm_classification_head": ("bool", None),
    "quant_noise_pq": ("float", _FRACTION),
    "quant_noise_pq_block_size": ("int", (0, 1 << 16)),
    "quant_noise_scalar": ("float", _FRACTION),
    "min_params_to_wrap": ("int", (0, 1 << 50)),
    "mha_reg_scale_factor": ("float", (0.0, 1e6)),
    "ffn_reg_scale_factor": ("float", (0.0, 1e6)),
    "mha_heads_to_keep": ("int", (-1, HEADS[1])),
    "ffn_blocks_to_remove": ("int", (-1, WIDTH[1])),
    "bert_layernorm_eps": ("float", (1e-30, 1.0)),
    "bert_type_vocab_size": ("int", (1, 1 << 16)),
    "bert_freeze_encoder": ("bool", None),
    "bert_sizes_from": ("path", None),
    "truneg_embed_init": ("path", None),
    # the plugin's ELECTRA (and CLINE on it)
    "electra_embed_dim": ("int", WIDTH),
    "electra_hidden_dim": ("int", WIDTH),
    "electra_layers": ("int", LAYERS),
    "electra_heads": ("int", HEADS),
    "electra_ffn_dim": ("int", WIDTH),
    "electra_gen_hidden_dim": ("int", WIDTH),
    "electra_gen_layers": ("int", LAYERS),
    "electra_gen_heads": ("int", HEADS),
    "electra_gen_ffn_dim": ("int", WIDTH),
    "electra_max_positions": ("int", POSITIONS),
    "electra_dropout": ("float", _FRACTION),
    "electra_attention_dropout": ("float", _FRACTION),
    "electra_pooler_dropout": ("float", _FRACTION),
    "electra_activation_fn": ("choice", "activation"),
    "electra_pooler_activation_fn": ("choice", "activation"),
    "electra_sample_temperature": ("float", (1e-6, 1e3)),
    "electra_layernorm_eps": ("float", (1e-30, 1.0)),
    "electra_discriminator_only": ("bool", None),
    "electra_freeze_discriminator": ("bool", None),
    "electra_embed_init": ("path", None),
    "electra_sizes_from": ("path", None),
}
# sizes bounded by what the weights hold (see check_against_weights)
LAYER_FIELDS = ("encoder_layers", "electra_layers", "electra_gen_layers")
DIM_FIELDS = tuple(
    k for k, (kind, rng) in SCHEMA.items() if kind == "int" and rng in (WIDTH, HEADS, POSITIONS)
) + ("bert_type_vocab_size",)

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_INT_LIST = re.compile(r"^\d{1,4}(,\d{1,4}){0,1023}$")
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def activations():
    from fairseq.utils import get_available_activation_fns

    return tuple(get_available_activation_fns())


def _refuse(where: str, key: str, value, why: str, fix: str):
    raise ModelValueError(f"{where}: {key} = {str(value)[:80]!r} is {why}; {fix}")


def check_value(key: str, value, where: str, fix: str):
    """``value`` of field ``key`` when it fits :data:`SCHEMA` (an int given for a float becomes a
    float), else :class:`ModelValueError`; a field outside the schema is returned as it is."""
    if value is None or key not in SCHEMA:
        return value
    kind, arg = SCHEMA[key]
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind == "int":
        if not is_int:
            _refuse(where, key, value, "not a whole number", fix)
        if not arg[0] <= value <= arg[1]:
            _refuse(where, key, value, f"outside {arg[0]}..{arg[1]}", fix)
    elif kind == "float":
        if not (is_int or isinstance(value, float)) or not math.isfinite(value):
            _refuse(where, key, value, "not a finite number", fix)
        if not arg[0] <= value <= arg[1]:
            _refuse(where, key, value, f"outside {arg[0]:g}..{arg[1]:g}", fix)
        return float(value)
    elif kind == "bool":
        if not isinstance(value, bool):
            _refuse(where, key, value, "not true or false", fix)
    elif kind == "choice":
        names = activations()
        if not isinstance(value, str) or value not in names:
            raise ModelValueError(
                f"{where.removesuffix(': model config')} records the activation function "
                f"{str(value)[:80]!r}, which fairseq does not know ({', '.join(names)}), as "
                f"{key}; {fix}"
            )
    elif kind == "int_list":
        if not isinstance(value, str) or (value and not _INT_LIST.match(value)):
            _refuse(where, key, value, "not a comma-separated list of layer numbers", fix)
    elif kind == "path":
        if (
            not isinstance(value, str)
            or not value
            or value.startswith("-")
            or any(c in value for c in "\n\r\0")
        ):
            _refuse(where, key, value, "not a path", fix)
        if _URL.match(value):
            _refuse(where, key, value, "not a local path (nothing is downloaded)", fix)
    return value


def _items(model) -> Mapping:
    if isinstance(model, argparse.Namespace):
        return vars(model)
    try:
        return {k: model[k] for k in model.keys()}
    except Exception:
        return {}


def weight_bounds(weights) -> Optional[tuple]:
    """(layers, largest dimension) the tensors of ``weights`` (a state dict) hold, or None when
    it holds no tensors."""
    if not isinstance(weights, Mapping) or not weights:
        return None
    layers, dim = 0, 0
    for name, t in weights.items():
        for m in _LAYER_INDEX.finditer(str(name)):
            layers = max(layers, int(m.group(1)) + 1)
        shape = getattr(t, "shape", None)
        if shape is not None and len(shape):
            dim = max(dim, max(int(s) for s in shape))
    return layers, dim


def check_against_weights(values: Mapping, weights, where: str, fix: str) -> None:
    """Each size of ``values`` within what ``weights`` hold (see the module docstring)."""
    bounds = weight_bounds(weights)
    if bounds is None:
        return
    layers, dim = bounds
    for key in LAYER_FIELDS:
        v = values.get(key)
        if isinstance(v, int) and v > max(layers, 1):
            _refuse(where, key, v, f"more than the {layers} layer(s) its weights hold", fix)
    for key in DIM_FIELDS:
        v = values.get(key)
        if isinstance(v, int) and v > max(dim, 1):
            _refuse(where, key, v, f"larger than any dimension of its weights (at most {dim})", fix)


CHECKPOINT_FIX = (
    "the file was edited or saved by other code. Use a checkpoint saved by fairseq-train or "
    "scripts/convert_hf.py import"
)


def check_model_values(model, path: str, weights=None, fix: str = CHECKPOINT_FIX) -> None:
    """Check (in place: ints given for floats become floats) the model config ``model`` (a
    DictConfig, dict or Namespace) read from ``path`` against :data:`SCHEMA` and, when given, the
    ``weights`` saved with it."""
    from omegaconf import open_dict

    values = _items(model)
    checked = {}
    for key, value in values.items():
        new = check_value(str(key), value, f"{path}: model config", fix)
        checked[key] = new
        if new is not value and type(new) is not type(value):
            try:
                if isinstance(model, argparse.Namespace):
                    setattr(model, key, new)
                else:
                    with open_dict(model):
                        model[key] = new
            except Exception:
                pass  # a read-only config: the value is checked, its type stays
    check_against_weights(checked, weights, f"{path}: model config", fix)


def is_url(value) -> bool:
    """Whether ``value`` is a string naming a URL (``scheme://...``) rather than a local path."""
    return isinstance(value, str) and bool(_URL.match(value.strip()))
