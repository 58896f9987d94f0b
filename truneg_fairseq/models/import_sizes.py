"""``--bert-sizes-from DIR`` / ``--electra-sizes-from DIR``: a model's sizes read from the
directory ``scripts/convert_hf.py import`` wrote, so that continuing a published model of any
size (6 x 384, 24 x 1024, ...) needs no size flags.

The import records the fairseq model fields it built the model with in ``DIR/import.json``
(``"model_args"``: layers, widths, heads, positions, LayerNorm epsilon, dropout, activation).
An arch function calls :func:`apply` before its own defaults: every field the command line (or
the hydra config) left unset takes the recorded value, then the directory is dropped from the
config, so checkpoints carry the sizes themselves and never point at the import directory.
Values are checked against the one schema of model fields
(:mod:`truneg_fairseq.checkpoint_schema.model_values`): nothing read from the file is evaluated.
"""

import json
import os
from typing import Dict

from truneg_fairseq.errors import (
    ImportSizesError,  # noqa: F401  (defined in the one place of the errors)
)

IMPORT_RECORD = "import.json"

# field -> the type its recorded value must have (int values are also accepted for floats)
FIELD_TYPES = {
    # the plugin's BERT (fairseq RoBERTa fields + bert_*)
    "encoder_layers": int,
    "encoder_embed_dim": int,
    "encoder_ffn_embed_dim": int,
    "encoder_attention_heads": int,
    "max_positions": int,
    "activation_fn": str,
    "dropout": float,
    "attention_dropout": float,
    "bert_layernorm_eps": float,
    "bert_type_vocab_size": int,
    "untie_weights_roberta": bool,  # a masked-LM output projection of its own
    # the plugin's ELECTRA
    "electra_embed_dim": int,
    "electra_hidden_dim": int,
    "electra_layers": int,
    "electra_heads": int,
    "electra_ffn_dim": int,
    "electra_gen_hidden_dim": int,
    "electra_gen_layers": int,
    "electra_gen_heads": int,
    "electra_gen_ffn_dim": int,
    "electra_max_positions": int,
    "electra_dropout": float,
    "electra_attention_dropout": float,
    "electra_layernorm_eps": float,
    "electra_discriminator_only": bool,
}


def read_model_args(directory: str, flag: str) -> Dict[str, object]:
    """The recorded model fields of an import directory, type-checked."""
    path = os.path.join(directory, IMPORT_RECORD)
    if not os.path.isfile(path):
        what = "no such directory" if not os.path.isdir(directory) else f"no {IMPORT_RECORD} in it"
        raise ImportSizesError(
            f"{flag} {directory}: {what}; give the directory written by "
            "python scripts/convert_hf.py import HF_DIR OUT_DIR"
        )
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise ImportSizesError(
            f"{flag} {directory}: {path} is not readable JSON ({e}); import the model again"
        ) from None
    args = record.get("model_args") if isinstance(record, dict) else None
    if not isinstance(args, dict):
        raise ImportSizesError(
            f'{flag} {directory}: {path} records no model sizes ("model_args"): it was written '
            "by an older import; import the model again with scripts/convert_hf.py import"
        )
    from truneg_fairseq.checkpoint_schema.model_values import ModelValueError, check_value

    fix = "import the model again with scripts/convert_hf.py import"
    out = {}
    for key, value in args.items():
        try:
            if key not in FIELD_TYPES:
                raise ModelValueError(
                    f"{path}: model_args.{key} is not a field an import records; {fix}"
                )
            out[key] = check_value(key, value, f"{flag} {directory}: {path}", fix)
        except ModelValueError as e:
            raise ImportSizesError(str(e)) from None
    return out


def apply(args, flag_field: str, keys=None) -> None:
    """Fill the unset model fields of ``args`` (Namespace or DictConfig) from the import
    directory named by ``args.<flag_field>``, then drop the directory from the config."""
    directory = getattr(args, flag_field, None)
    if not directory:
        return
    flag = "--" + flag_field.replace("_", "-")
    for key, value in read_model_args(str(directory), flag).items():
        if keys is not None and key not in keys:
            continue
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    setattr(args, flag_field, None)
