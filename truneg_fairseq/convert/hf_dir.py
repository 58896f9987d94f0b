"""Reading a local HuggingFace directory (``config.json``, weights in ``model.safetensors`` or
``pytorch_model.bin``, sharded or not, and ``vocab.txt`` or a WordPiece ``tokenizer.json``),
checked before anything is built: these files come from elsewhere, so each is read without
running code and every value is checked for its type."""

import json
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from truneg_fairseq.convert.checks import check_finite, check_heads, check_sizes
from truneg_fairseq.convert.keys import HF_TO_FAIRSEQ_ACT
from truneg_fairseq.errors import ConversionError
from truneg_fairseq.text import TokenizerError
from truneg_fairseq.text import read_wordpiece_vocab as text_vocab

BERT_ARCHS = ("BertForMaskedLM", "BertForPreTraining", "BertModel")
ELECTRA_ARCHS = ("ElectraForPreTraining",)
GENERATOR_ARCHS = ("ElectraForMaskedLM",)
SUPPORTED_ARCHS = BERT_ARCHS + ELECTRA_ARCHS


WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


@dataclass
class HFCheckpoint:
    path: Path
    config: dict
    arch: str
    state: Dict[str, torch.Tensor]  # LayerNorm gamma/beta already renamed weight/bias
    vocab: Optional[List[str]]  # WordPiece entries in id order
    lowercase: Optional[bool]  # None: the directory does not say


def _check_local_dir(path, what: str) -> Path:
    p = Path(path)
    if p.is_dir():
        return p
    if p.exists():
        raise ConversionError(f"{what} {path} is a file; give the directory that holds config.json")
    looks_like_hub = re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", str(path)) is not None
    hint = (
        f" It looks like a model name on the HuggingFace hub: download it first, e.g. "
        f"`hf download {path} --local-dir DIR` (or save_pretrained it with transformers), "
        "then give DIR; this converter never downloads."
        if looks_like_hub
        else ""
    )
    raise ConversionError(f"{what} {path} is not a local directory.{hint}")


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConversionError(f"{path} is not valid JSON ({e})") from None


def _load_weight_file(path: Path) -> Dict[str, torch.Tensor]:
    if path.name.endswith(".safetensors"):
        from safetensors.torch import load_file

        try:
            return load_file(str(path), device="cpu")
        except Exception as e:  # safetensors raises its own error types for a damaged file
            raise ConversionError(
                f"{path} is not a readable safetensors file (truncated or damaged: {str(e).splitlines()[0][:120]}); "
                "download it again"
            ) from None
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        unsafe = "GLOBAL" in str(e) or "Unsupported" in str(e)
        raise ConversionError(
            f"{path} is refused: it holds Python objects, not only weights ({first[:160]}); a weight file is "
            "never loaded with code. Use the model.safetensors of the same model"
            if unsafe
            else f"{path} is not a readable weight file ({first[:160]}): truncated or damaged; download it again"
        ) from None
    except (RuntimeError, EOFError, OSError) as e:
        raise ConversionError(
            f"{path} is not a readable weight file ({str(e).splitlines()[0][:160]}): truncated or "
            "damaged; download it again"
        ) from None
    if not isinstance(state, dict):
        raise ConversionError(f"{path} does not hold a state dict (got {type(state).__name__})")
    return state


def load_weights(hf_dir: Path) -> Dict[str, torch.Tensor]:
    """All tensors of a HF directory (single or sharded, safetensors preferred); LayerNorm
    ``gamma``/``beta`` (old BERT checkpoints) renamed ``weight``/``bias``."""
    for name in WEIGHT_FILES:
        path = hf_dir / name
        if not path.is_file():
            continue
        if name.endswith(".index.json"):
            shards = sorted(set(_read_json(path).get("weight_map", {}).values()))
            outside = [
                s
                for s in shards
                if not isinstance(s, str) or (hf_dir / s).resolve().parent != hf_dir.resolve()
            ]
            if outside:
                raise ConversionError(
                    f"{path} names shard files outside {hf_dir}: {', '.join(map(str, outside))}; "
                    "a shard index may only name files beside it"
                )
            missing = [s for s in shards if not (hf_dir / s).is_file()]
            if missing:
                raise ConversionError(
                    f"{path} names shard files that are missing: {', '.join(missing)}"
                )
            state = {}
            for s in shards:
                state.update(_load_weight_file(hf_dir / s))
        else:
            state = _load_weight_file(path)
        out = {}
        for k, v in state.items():
            k = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", k)
            out[re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k)] = v
        return out
    raise ConversionError(
        f"no weights in {hf_dir}: expected one of {', '.join(WEIGHT_FILES)} (save the model with "
        "transformers' save_pretrained, or download the weight files too)"
    )


def read_hf_vocab(hf_dir: Path, what: str = "HF_DIR") -> Tuple[Optional[List[str]], Optional[bool]]:
    """(entries in id order, lowercase) of the directory's ``vocab.txt``, else its WordPiece
    ``tokenizer.json``, read and checked by the one WordPiece reader
    (:func:`truneg_fairseq.text.read_wordpiece_vocab`); lowercase as either file or the configs
    beside them say. (None, None) when the directory has neither file."""
    files = [hf_dir / name for name in ("vocab.txt", "tokenizer.json") if (hf_dir / name).is_file()]
    if not files:
        return None, None
    try:
        read = [text_vocab(path, what) for path in files]
    except TokenizerError as e:
        raise ConversionError(str(e)) from None
    return read[0][0], next((lower for _, lower in read if lower is not None), None)


# the config.json values the converter builds a model from, and their types: checked before
# anything is built, so a value can only ever be a number of the right kind
CONFIG_INTS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
    "embedding_size",
    "pad_token_id",
)
CONFIG_FLOATS = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "layer_norm_eps",
    "initializer_range",
)
CONFIG_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


def check_config_types(config, cfg_path: Path) -> None:
    """One clear error for a config.json that is not an object, misses a size, or holds a value
    of the wrong type where the converter reads a number."""
    if not isinstance(config, dict):
        raise ConversionError(f"{cfg_path}: expected a JSON object, got a {type(config).__name__}")
    for key in CONFIG_REQUIRED:
        if key not in config:
            raise ConversionError(f"{cfg_path}: no {key!r}: not a complete BERT/ELECTRA config")
    for key in CONFIG_INTS:
        value = config.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ConversionError(
                f"{cfg_path}: {key} must be a non-negative integer, got {value!r}"
            )
    for key in CONFIG_FLOATS:
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConversionError(f"{cfg_path}: {key} must be a number, got {value!r}")
    for key in ("hidden_act", "position_embedding_type", "model_type"):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise ConversionError(f"{cfg_path}: {key} must be a string, got {value!r}")
    for key in ("architectures",):
        value = config.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise ConversionError(f"{cfg_path}: {key} must be a list of class names, got {value!r}")


def read_hf_dir(
    path, what: str = "HF_DIR", archs=SUPPORTED_ARCHS, need_vocab: bool = True
) -> HFCheckpoint:
    """Read and check a local HuggingFace directory of one of ``archs``."""
    hf_dir = _check_local_dir(path, what)
    cfg_path = hf_dir / "config.json"
    if not cfg_path.is_file():
        raise ConversionError(f"{hf_dir} has no config.json: not a HuggingFace model directory")
    config = _read_json(cfg_path)
    check_config_types(config, cfg_path)
    check_heads(config, cfg_path)
    found = config.get("architectures") or []
    arch = next((a for a in found if a in archs), None)
    if arch is None:
        raise ConversionError(
            f"{cfg_path}: architectures {found or '(none listed)'} are not supported here; supported: "
            f"{', '.join(archs)}"
        )
    for key, want in (("position_embedding_type", "absolute"),):
        if config.get(key, want) != want:
            raise ConversionError(
                f"{cfg_path}: {key} {config[key]!r} is not supported (only {want!r})"
            )
    if config.get("hidden_act", "gelu") not in HF_TO_FAIRSEQ_ACT:
        raise ConversionError(
            f"{cfg_path}: hidden_act {config['hidden_act']!r} is not supported ({', '.join(HF_TO_FAIRSEQ_ACT)})"
        )
    vocab, lowercase = read_hf_vocab(hf_dir, what)
    if vocab is None and need_vocab:
        raise ConversionError(
            f"no vocabulary in {hf_dir}: expected vocab.txt or a WordPiece tokenizer.json"
        )
    state = load_weights(hf_dir)
    check_sizes(config, state, cfg_path)  # before any model is built from these sizes
    check_finite(
        state, hf_dir, "the weights are damaged or come from a diverged run: use another copy"
    )
    return HFCheckpoint(hf_dir, config, arch, state, vocab, lowercase)
