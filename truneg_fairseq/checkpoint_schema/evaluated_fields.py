"""The config fields fairseq evaluates as Python (:data:`EVALUATED_FIELDS`) and the check that
such a field read from a file holds plain data (:func:`safe_literal`), with the error every
checkpoint config check raises (:class:`UnsafeCheckpointError`)."""

from __future__ import annotations

import ast

from truneg_fairseq.errors import (
    UnsafeCheckpointError,  # noqa: F401  (defined in the one place of the errors)
)

# config fields (any group, any prefix such as encoder_/decoder_) whose string value fairseq 0.12
# evaluates with eval(), utils.eval_str_dict / eval_str_list / eval_bool anywhere in its source
# (models of every family, optimizers, tasks, criterions, examples). tests/test_checkpoint_code.py
# derives the set from the installed fairseq and fails when a call site reads a field missing here:
# a deny-list kept by hand missed fconv's decoder_layers and wav2vec's conv_feature_layers.
EVALUATED_FIELDS = (
    "xformers_att_config",
    "adaptive_softmax_cutoff",
    "adaptive_input_cutoff",
    "kernel_size_list",
    "left_pad_source",
    "left_pad_target",
    "pipeline_balance",
    "pipeline_devices",
    "decoder_attention",
    "adam_betas",
    "adamax_betas",
    "lamb_betas",
    "adafactor_eps",
    "wer_args",
    # fconv, fconv_lm, fconv_self_att
    "encoder_layers",
    "decoder_layers",
    "encoder_attention",
    "self_attention",
    "project_input",
    "gated_attention",
    "downsample",
    "pretrained",
    # transformer_lm, lightconv_lm; wav2vec, wav2vec2, hubert, speech_to_text, data2vec
    "character_filters",
    "conv_feature_layers",
    "conv_aggregator_layers",
    "feature_encoder_spec",
    # pipeline-parallel transformer; examples (laser, speech_recognition, scripts)
    "pipeline_encoder_balance",
    "pipeline_encoder_devices",
    "pipeline_decoder_balance",
    "pipeline_decoder_devices",
    "decoder_zero_init",
    "conv_enc_config",
    "conv_dec_config",
    "vggblock_enc_config",
    "transformer_enc_config",
    "transformer_dec_config",
    "transformer_context",
    "transformer_sampling",
    "model_overrides",
)


def _evaluated(key: str) -> bool:
    return key.endswith(
        EVALUATED_FIELDS
    )  # the field itself or a prefixed one (encoder_..., decoder_...)


_MAX_ITEMS = 100_000  # a value fairseq evaluates is a short layer list, never this long
_MAX_TEXT = 100_000  # characters of such a value: fairseq's longest default is under 100


def _weight(value) -> int:
    """How many items a literal holds, nested ones and characters of strings included."""
    if isinstance(value, (str, bytes)):
        return max(len(value), 1)
    if isinstance(value, (list, tuple, set, frozenset)):
        return 1 + sum(_weight(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(_weight(k) + _weight(v) for k, v in value.items())
    return 1


def _too_large(weight: int) -> int:
    if weight > _MAX_ITEMS:
        raise ValueError("too long")
    return weight


def _data_value(node):
    """(value, weight) of expression ``node`` when it is plain data: a literal
    (``ast.literal_eval``'s grammar) or lists/tuples/strings/numbers joined by ``+`` and
    repeated by ``*`` an integer, the form fairseq's own defaults take (``"[(512, 3)] * 20"`` in
    fconv, ``"[(512, 10, 5)] + [(512, 3, 2)] * 4"`` in wav2vec2). Anything else (a name, a call,
    an attribute, a comprehension) raises ValueError: it is code. The weight (:func:`_weight`:
    items, nested ones and characters counted) is known before each ``+`` and ``*`` is done and
    bounded after every one, so no chain of them builds more than ``_MAX_ITEMS`` items or copies
    more than that many at a step."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        (left, lw), (right, rw) = _data_value(node.left), _data_value(node.right)
        if isinstance(node.op, ast.Mult):
            count = right if isinstance(right, int) and not isinstance(right, bool) else left
            other, ow = (left, lw) if count is right else (right, rw)
            if (
                isinstance(other, (list, tuple, str))
                and isinstance(count, int)
                and not isinstance(count, bool)
            ):
                weight = _too_large(ow * max(count, 0))
            elif isinstance(left, (int, float)) and isinstance(right, (int, float)):
                weight = 1
            else:
                raise ValueError("not data")
        elif type(left) is type(right) and isinstance(left, (list, tuple, str)):
            weight = _too_large(lw + rw)
        elif isinstance(left, (int, float, complex)) and isinstance(right, (int, float, complex)):
            weight = 1
        else:
            raise ValueError("not data")
        value = left * right if isinstance(node.op, ast.Mult) else left + right
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > 1e18:
            raise ValueError("too large")
        return value, weight
    if isinstance(node, (ast.List, ast.Tuple)):
        items, weight = [], 1
        for element in node.elts:
            value, w = _data_value(element)
            items.append(value)
            weight = _too_large(weight + w)
        return (items if isinstance(node, ast.List) else tuple(items)), weight
    value = ast.literal_eval(node)
    return value, _too_large(_weight(value))


def safe_literal(value, where: str):
    """``value`` itself when it is not a string; a string fairseq would ``eval``: the same text
    without surrounding blanks (evaluating it builds the plain value :func:`_data_value` reads,
    and a field fairseq also splits, ``encoder_layers_to_keep``, keeps its form), or
    :class:`UnsafeCheckpointError` when it is anything but plain data."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if len(text) > _MAX_TEXT:
            raise ValueError("too long")
        if text:
            _data_value(ast.parse(text, mode="eval").body)
        return text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
        raise UnsafeCheckpointError(
            f"{where} is {value[:80]!r}: fairseq evaluates this field as Python, and it is not a plain "
            "value (numbers, strings, lists, dicts) but code. The checkpoint was not loaded; if you made "
            "it yourself, set the field to null (or a literal) and save it again"
        ) from None
