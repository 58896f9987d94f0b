"""HuggingFace checkpoints in and out: published BERT and ELECTRA weights as fairseq checkpoints of
the plugin, and plugin checkpoints back as ``transformers`` directories.

Import (:func:`import_hf`) reads a local HuggingFace directory (``config.json``, weights in
``model.safetensors`` or ``pytorch_model.bin``, sharded or not, and ``vocab.txt`` or a WordPiece
``tokenizer.json``) and writes ``OUT_DIR/model.pt`` (a fairseq checkpoint with its config),
``OUT_DIR/dict.txt`` and ``OUT_DIR/vocab.txt``:

* ``BertForMaskedLM``/``BertForPreTraining``/``BertModel`` -> the plugin's ``bert`` model
  (fairseq's RoBERTa with BERT's LayerNorm epsilon, models/bert.py);
* ``ElectraForPreTraining`` (+ a generator directory holding ``ElectraForMaskedLM``) -> the
  plugin's ``electra`` model, embeddings shared by both networks.

Vocabulary: fairseq puts ``<s> <pad> </s> <unk>`` first and adds ``<mask>`` last, so the fairseq
rows are HF's ``[CLS] [PAD] [SEP] [UNK]``, then every other WordPiece entry in HF id order, then
``[MASK]``; ``dict.txt`` lists the entries between (same vocabulary size). Positions: BERT's
0-based row ``i`` is fairseq's row ``padding_idx + 1 + i``; the token-type row of segment 0 is
added to every position row (fairseq feeds one segment).

Export (:func:`export_hf`) reverses this: an ELECTRA checkpoint gives ``ElectraForPreTraining``
(+ ``generator/`` with ``ElectraForMaskedLM`` when the checkpoint has a generator), a ``bert``
checkpoint ``BertForMaskedLM`` and a fairseq ``roberta`` checkpoint ``RobertaForMaskedLM``, each
with ``config.json`` and its vocabulary. Only torch and safetensors are needed (no
``transformers``).
"""

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from truneg_fairseq.checkpoints import build_model, load_for_inference
from truneg_fairseq.io_utils import atomic_dir
from truneg_fairseq.text import BERT_MASK, BERT_SPECIALS, TokenizerError, dict_lines_of, wordpiece_row_order
from truneg_fairseq.text import read_wordpiece_vocab as text_vocab

logger = logging.getLogger(__name__)

BERT_ARCHS = ("BertForMaskedLM", "BertForPreTraining", "BertModel")
ELECTRA_ARCHS = ("ElectraForPreTraining",)
GENERATOR_ARCHS = ("ElectraForMaskedLM",)
SUPPORTED_ARCHS = BERT_ARCHS + ELECTRA_ARCHS

# HF WordPiece special -> fairseq symbol, in fairseq's row order (<mask> is appended last)
SPECIALS, MASK = BERT_SPECIALS, BERT_MASK
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")

# HF hidden_act -> fairseq activation_fn (erf GELU is "gelu" in both)
HF_TO_FAIRSEQ_ACT = {"gelu": "gelu", "gelu_new": "gelu_accurate", "gelu_pytorch_tanh": "gelu_accurate", "relu": "relu"}
FAIRSEQ_TO_HF_ACT = {"gelu": "gelu", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new", "relu": "relu"}

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
DISCRIMINATOR_HEAD: KeyTable = (("discriminator_predictions.dense.", "discriminator_head.dense."),
                                ("discriminator_predictions.dense_prediction.", "discriminator_head.out_proj."))
GENERATOR_HEAD: KeyTable = (("generator_predictions.dense.", "generator_head.dense."),
                            ("generator_predictions.LayerNorm.", "generator_head.layer_norm."))
BERT_MLM_HEAD: KeyTable = (("cls.predictions.transform.dense.", "encoder.lm_head.dense."),
                           ("cls.predictions.transform.LayerNorm.", "encoder.lm_head.layer_norm."))
ROBERTA_MLM_HEAD: KeyTable = (("lm_head.dense.", "encoder.lm_head.dense."),
                              ("lm_head.layer_norm.", "encoder.lm_head.layer_norm."))
BERT_POOLER: KeyTable = (("pooler.dense.", "bert_pooler_"),)  # HF side under the model's base prefix
ELECTRA_PROJECTION: KeyTable = (("electra.embeddings_project.", "project."),)  # fairseq side under the stack's prefix


def _hf_to_fairseq(state, table: KeyTable, where: str, hf_base: str = "", fs_base: str = "") -> Dict[str, torch.Tensor]:
    return {fs_base + fs + p: _take(state, hf_base + hf + p, where) for hf, fs in table for p in ("weight", "bias")}


def _fairseq_to_hf(state, table: KeyTable, hf_base: str = "", fs_base: str = "") -> Dict[str, torch.Tensor]:
    return {hf_base + hf + p: state[fs_base + fs + p] for hf, fs in table for p in ("weight", "bias")}


def _has(state, table: KeyTable, hf_base: str = "") -> bool:
    """``state`` (HF keys) holds the part that ``table`` maps."""
    return hf_base + table[0][0] + "weight" in state


def _layer_table(hf_prefix: str, fs_prefix: str, n: int) -> KeyTable:
    """(HF prefix, fairseq prefix) of every tensor of ``n`` transformer layers."""
    return tuple((f"{hf_prefix}{i}.{hf}", f"{fs_prefix}{i}.{fs}") for i in range(n) for hf, fs in LAYER_MAP)


class ConversionError(ValueError):
    """A directory or checkpoint that cannot be converted; the message says what to do."""


# ---------------------------------------------------------------------------------------------
# reading a HuggingFace directory
# ---------------------------------------------------------------------------------------------
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
    import pickle

    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        unsafe = "GLOBAL" in str(e) or "Unsupported" in str(e)
        raise ConversionError(
            f"{path} is refused: it holds Python objects, not only weights ({first[:160]}); a weight file is "
            "never loaded with code. Use the model.safetensors of the same model"
            if unsafe else f"{path} is not a readable weight file ({first[:160]}): truncated or damaged; download it again"
        ) from None
    except (RuntimeError, EOFError, OSError) as e:
        raise ConversionError(f"{path} is not a readable weight file ({str(e).splitlines()[0][:160]}): truncated or "
                              "damaged; download it again") from None
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
            outside = [s for s in shards if not isinstance(s, str) or (hf_dir / s).resolve().parent != hf_dir.resolve()]
            if outside:
                raise ConversionError(f"{path} names shard files outside {hf_dir}: {', '.join(map(str, outside))}; "
                                      "a shard index may only name files beside it")
            missing = [s for s in shards if not (hf_dir / s).is_file()]
            if missing:
                raise ConversionError(f"{path} names shard files that are missing: {', '.join(missing)}")
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
CONFIG_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "max_position_embeddings", "type_vocab_size", "embedding_size", "pad_token_id")
CONFIG_FLOATS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps", "initializer_range")
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
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConversionError(f"{cfg_path}: {key} must be a non-negative integer, got {value!r}")
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
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ConversionError(f"{cfg_path}: {key} must be a list of class names, got {value!r}")


def read_hf_dir(path, what: str = "HF_DIR", archs=SUPPORTED_ARCHS, need_vocab: bool = True) -> HFCheckpoint:
    """Read and check a local HuggingFace directory of one of ``archs``."""
    hf_dir = _check_local_dir(path, what)
    cfg_path = hf_dir / "config.json"
    if not cfg_path.is_file():
        raise ConversionError(f"{hf_dir} has no config.json: not a HuggingFace model directory")
    config = _read_json(cfg_path)
    check_config_types(config, cfg_path)
    found = config.get("architectures") or []
    arch = next((a for a in found if a in archs), None)
    if arch is None:
        raise ConversionError(
            f"{cfg_path}: architectures {found or '(none listed)'} are not supported here; supported: "
            f"{', '.join(archs)}"
        )
    for key, want in (("position_embedding_type", "absolute"),):
        if config.get(key, want) != want:
            raise ConversionError(f"{cfg_path}: {key} {config[key]!r} is not supported (only {want!r})")
    if config.get("hidden_act", "gelu") not in HF_TO_FAIRSEQ_ACT:
        raise ConversionError(
            f"{cfg_path}: hidden_act {config['hidden_act']!r} is not supported ({', '.join(HF_TO_FAIRSEQ_ACT)})"
        )
    vocab, lowercase = read_hf_vocab(hf_dir, what)
    if vocab is None and need_vocab:
        raise ConversionError(f"no vocabulary in {hf_dir}: expected vocab.txt or a WordPiece tokenizer.json")
    state = load_weights(hf_dir)
    return HFCheckpoint(hf_dir, config, arch, state, vocab, lowercase)


# ---------------------------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------------------------
def hf_vocab_from_dictionary(symbols: List[str]) -> List[str]:
    """fairseq dictionary symbols (row order) -> WordPiece entries with BERT's special names."""
    to_hf = {fs: hf for hf, fs in SPECIALS + (MASK,)}
    return [to_hf.get(s, s) for s in symbols]


# ---------------------------------------------------------------------------------------------
# import
# ---------------------------------------------------------------------------------------------
def _take(state: Dict[str, torch.Tensor], key: str, where: str) -> torch.Tensor:
    if key not in state:
        raise ConversionError(f"{where} lacks the tensor {key}: the weights do not match config.json's architecture")
    return state[key].float()


def _layers(state, hf_prefix: str, fs_prefix: str, n: int, where: str) -> Dict[str, torch.Tensor]:
    found = {int(m.group(1)) for k in state for m in [re.match(re.escape(hf_prefix) + r"(\d+)\.", k)] if m}
    if found and max(found) >= n:
        raise ConversionError(
            f"{where}: the weights hold {max(found) + 1} layers ({hf_prefix}0-{max(found)}) but config.json says "
            f"num_hidden_layers {n}: the config does not belong to these weights (importing would drop layers). "
            "Use the config.json published with them"
        )
    return _hf_to_fairseq(state, _layer_table(hf_prefix, fs_prefix, n), where)


def _positions(pos: torch.Tensor, type0: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """HF 0-based position rows (+ segment 0) -> fairseq's table (rows shifted by padding_idx+1)."""
    table = pos.new_zeros(pos.size(0) + padding_idx + 1, pos.size(1))
    table[padding_idx + 1:] = pos + type0
    return table


def _embeddings(state, prefix, order, padding_idx, where):
    """Token rows in fairseq order, position table, segment offsets, embedding LayerNorm."""
    words = _take(state, prefix + "word_embeddings.weight", where)
    types = _take(state, prefix + "token_type_embeddings.weight", where)
    return {
        "tokens": words[order],
        "positions": _positions(_take(state, prefix + "position_embeddings.weight", where), types[0], padding_idx),
        "segment_offsets": types - types[0:1],
        "ln_w": _take(state, prefix + "LayerNorm.weight", where),
        "ln_b": _take(state, prefix + "LayerNorm.bias", where),
    }


def _check_vocab_size(ck: HFCheckpoint, rows: int):
    if len(ck.vocab) != rows or ck.config.get("vocab_size", rows) != rows:
        raise ConversionError(
            f"{ck.path}: the vocabulary has {len(ck.vocab)} entries but the word embedding has {rows} rows "
            f"(config vocab_size {ck.config.get('vocab_size')}); use the vocabulary the model was trained with"
        )


def _build(task: str, arch: str, sizes: Dict[str, object], data_dir: Path):
    """fairseq (cfg, task, model) for ``--task task --arch arch`` with the model fields in
    ``sizes`` (typed values read from config.json, set on the config object: nothing read from a
    file passes through a command line), as fairseq-train builds them."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import truneg_fairseq  # noqa: F401  (registration)

    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(parser, [str(data_dir), "--cpu", "--task", task, "--arch", arch])
    for key, value in sizes.items():  # keys: fields of the arch's model (and task) config
        setattr(ns, key, value)
    cfg = convert_namespace_to_omegaconf(ns)
    task_ = tasks.setup_task(cfg.task)
    return cfg, task_, build_model(cfg, task_)


def _fill(model, converted: Dict[str, torch.Tensor]) -> None:
    """Load ``converted`` into ``model``: every tensor must be given, except buffers the model
    keeps for itself (kept as built: e.g. the pooler of a source without one)."""
    own = model.state_dict()
    unknown = sorted(set(converted) - set(own))
    if unknown:
        raise ConversionError(f"internal mapping produced keys the model lacks: {unknown[:5]}")
    buffers = {n for n, _ in model.named_buffers()}  # the model's own bookkeeping (e.g. its LayerNorm eps)
    missing = [k for k in own if k not in converted and k not in buffers and not k.endswith(".version")]
    if missing:
        raise ConversionError(f"the weights give no value for {len(missing)} tensors, e.g. {missing[:5]}")
    for k, v in converted.items():
        if own[k].shape != v.shape:
            raise ConversionError(f"tensor {k}: the weights have shape {tuple(v.shape)}, the model {tuple(own[k].shape)}")
    merged = dict(own)
    merged.update(converted)
    model.load_state_dict(merged, strict=True)


def _save_checkpoint(path: Path, cfg, model) -> None:
    from omegaconf import OmegaConf

    state = {
        "args": None,
        "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "model": model.state_dict(),
        "criterion": {},
        "optimizer_history": [
            {"criterion_name": "none", "optimizer_name": "none", "lr_scheduler_state": {"best": None}, "num_updates": 0}
        ],
        "task_state": {},
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "version": 2}},
        "last_optimizer_state": None,
    }
    torch.save(state, path)


def _bert_sizes(c: dict, max_positions: int) -> Dict[str, object]:
    return {
        "encoder_layers": int(c["num_hidden_layers"]), "encoder_embed_dim": int(c["hidden_size"]),
        "encoder_ffn_embed_dim": int(c["intermediate_size"]), "encoder_attention_heads": int(c["num_attention_heads"]),
        "max_positions": max_positions, "tokens_per_sample": max_positions,
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
    _check_vocab_size(ck, rows)
    order = wordpiece_row_order(ck.vocab)
    max_positions = _take(s, base + "embeddings.position_embeddings.weight", where).size(0)
    cfg, task, model = _build("masked_lm", "bert_hf", _bert_sizes(c, max_positions), work)
    pad = task.source_dictionary.pad()
    emb = _embeddings(s, base + "embeddings.", order, pad, where)
    enc = "encoder.sentence_encoder."
    out = {
        enc + "embed_tokens.weight": emb["tokens"],
        enc + "embed_positions.weight": emb["positions"],
        enc + "layernorm_embedding.weight": emb["ln_w"],
        enc + "layernorm_embedding.bias": emb["ln_b"],
        "bert_segment_offsets": emb["segment_offsets"],
        "encoder.lm_head.weight": emb["tokens"],
    }
    out.update(_layers(s, base + "encoder.layer.", enc + "layers.", c["num_hidden_layers"], where))
    if _has(s, BERT_MLM_HEAD):
        head = "cls.predictions."
        bias_key = head + "bias" if head + "bias" in s else head + "decoder.bias"
        out.update(_hf_to_fairseq(s, BERT_MLM_HEAD, where))
        out["encoder.lm_head.bias"] = _take(s, bias_key, where)[order]
        _warn_untied(s, head + "decoder.weight", _take(s, base + "embeddings.word_embeddings.weight", where), "MLM decoder")
    else:
        out.update(fresh_mlm_head(model.args.encoder_embed_dim, len(task.source_dictionary),
                                  float(c.get("initializer_range") or 0.02), seed))
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
    _fill(model, out)
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


def _warn_untied(state, key, embeddings, what):
    if key in state and state[key].shape == embeddings.shape:
        diff = (state[key].float() - embeddings).abs().max().item()
        if diff > 0:
            logger.warning(f"the {what} weight differs from the word embeddings (max {diff:.3g}); "
                           "the fairseq model ties them and keeps the word embeddings")


def generator_sizes(hidden: int) -> Dict[str, int]:
    """The generator of a discriminator published without one, sized as the published pairs are:
    a quarter of the discriminator's width (a third for width 768, as ELECTRA-base), heads of
    64, FFN 4 x hidden; as many layers as the discriminator."""
    gen_hidden = max(hidden // 3 if hidden == 768 else hidden // 4, 1)
    return {"hidden_size": gen_hidden, "num_attention_heads": max(gen_hidden // 64, 1), "intermediate_size": 4 * gen_hidden}


def _electra_sizes(d: dict, g: Optional[dict], max_positions: int) -> Dict[str, object]:
    # a discriminator alone: the generator that pre-training adds (fresh, warmed up first)
    gen = g or dict(generator_sizes(int(d["hidden_size"])), num_hidden_layers=d["num_hidden_layers"])
    return {
        "electra_embed_dim": int(d.get("embedding_size", d["hidden_size"])),
        "electra_hidden_dim": int(d["hidden_size"]), "electra_layers": int(d["num_hidden_layers"]),
        "electra_heads": int(d["num_attention_heads"]), "electra_ffn_dim": int(d["intermediate_size"]),
        "electra_gen_hidden_dim": int(gen["hidden_size"]), "electra_gen_layers": int(gen["num_hidden_layers"]),
        "electra_gen_heads": int(gen["num_attention_heads"]), "electra_gen_ffn_dim": int(gen["intermediate_size"]),
        "electra_max_positions": max_positions, "tokens_per_sample": max_positions,
        "electra_dropout": float(d.get("hidden_dropout_prob", 0.1)),
        "electra_attention_dropout": float(d.get("attention_probs_dropout_prob", 0.1)),
        "electra_layernorm_eps": float(d.get("layer_norm_eps", 1e-12)),
        "electra_discriminator_only": g is None,
    }


def _check_pair(ck: HFCheckpoint, gen: HFCheckpoint, words: torch.Tensor, pos: torch.Tensor, allow_unshared: bool) -> None:
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
        raise ConversionError(f"the generator's vocabulary in {gen.path} differs from the discriminator's in {ck.path}")
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
                    logger.warning(f"generator and discriminator differ in {key} (max {diff:.3g}); the "
                                   "imported model shares the discriminator's embeddings")


def _import_electra(ck: HFCheckpoint, gen: Optional[HFCheckpoint], work: Path, allow_unshared: bool = False):
    d, s, where = ck.config, ck.state, str(ck.path)
    for cfg_ in (d, gen.config if gen else {}):
        if cfg_.get("hidden_act", "gelu") != "gelu":
            raise ConversionError(f"ELECTRA with hidden_act {cfg_['hidden_act']!r}: only 'gelu' (erf) is supported")
    words = _take(s, "electra.embeddings.word_embeddings.weight", where)
    _check_vocab_size(ck, words.size(0))
    order = wordpiece_row_order(ck.vocab)
    pos = _take(s, "electra.embeddings.position_embeddings.weight", where)
    if gen is not None:
        _check_pair(ck, gen, words, pos, allow_unshared)
    cfg, task, model = _build("electra", "electra_base", _electra_sizes(d, gen.config if gen else None, pos.size(0)), work)
    pad = task.source_dictionary.pad()
    emb = _embeddings(s, "electra.embeddings.", order, pad, where)
    out = {
        "embeddings.embed_tokens.weight": emb["tokens"],
        "embeddings.embed_positions.weight": emb["positions"],
        "embeddings.layer_norm.weight": emb["ln_w"],
        "embeddings.layer_norm.bias": emb["ln_b"],
        **_hf_to_fairseq(s, DISCRIMINATOR_HEAD, where),
    }
    if emb["segment_offsets"].abs().max() > 0:
        logger.info("ELECTRA in the plugin feeds one segment: token-type row 0 is folded into the positions, "
                    "the other rows are not kept")
    out.update(_stack(s, "discriminator.", d, where))
    if gen is not None:
        gs, gwhere = gen.state, str(gen.path)
        out.update(_stack(gs, "generator.", gen.config, gwhere))
        out.update(_hf_to_fairseq(gs, GENERATOR_HEAD, gwhere))
        out["generator_bias"] = _take(gs, "generator_lm_head.bias", gwhere)[order]
        _warn_untied(gs, "generator_lm_head.weight", words, "generator output")
    else:
        logger.warning(
            f"no --generator given: {ck.path} is imported as a discriminator alone; it fine-tunes "
            "(sentence_prediction, squad) as it is, and ELECTRA pre-training adds a fresh generator, warmed up "
            "first with the discriminator frozen (--electra-freeze-discriminator; examples/electra/pretrain.sh does it)"
        )
    _fill(model, out)
    return cfg, model


def _stack(state, fs_prefix: str, config: dict, where: str) -> Dict[str, torch.Tensor]:
    out = _layers(state, "electra.encoder.layer.", fs_prefix + "layers.", config["num_hidden_layers"], where)
    if _has(state, ELECTRA_PROJECTION):
        out.update(_hf_to_fairseq(state, ELECTRA_PROJECTION, where, fs_base=fs_prefix))
    return out


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def import_hf(hf_dir, out_dir, generator_dir=None, allow_unshared_embeddings: bool = False, seed: int = 1) -> Path:
    """Convert a local HF directory to ``out_dir`` (model.pt, dict.txt, vocab.txt, import.json
    and the tokenizer files found). Nothing is written unless the whole conversion succeeds.
    ``import.json`` records the source, the fairseq model fields (``model_args``: what
    ``--bert-sizes-from``/``--electra-sizes-from`` read) and whether the masked-LM head was
    imported or started fresh from ``seed``."""
    ck = read_hf_dir(hf_dir)
    gen = None
    if generator_dir is not None:
        if ck.arch not in ELECTRA_ARCHS:
            raise ConversionError(f"--generator is for ElectraForPreTraining; {ck.path} holds {ck.arch}")
        gen = read_hf_dir(generator_dir, "--generator", GENERATOR_ARCHS, need_vocab=False)
    out_dir = Path(out_dir).resolve()
    inputs = {"HF_DIR": hf_dir, "--generator": generator_dir}  # kept, even inside OUT_DIR
    with atomic_dir(out_dir, "convert_hf.py import", inputs=inputs) as work:
        with open(work / "dict.txt", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in dict_lines_of(ck.vocab)))
        with open(work / "vocab.txt", "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in ck.vocab))
        for name in TOKENIZER_FILES:
            if (ck.path / name).is_file():
                shutil.copyfile(ck.path / name, work / name)
        with torch.no_grad():
            if ck.arch in BERT_ARCHS:
                cfg, model = _import_bert(ck, work, seed)
                head = "imported" if _has(ck.state, BERT_MLM_HEAD) else f"fresh (seed {seed})"
                sizes = _bert_sizes(ck.config, cfg.model.max_positions)
            else:
                cfg, model = _import_electra(ck, gen, work, allow_unshared_embeddings)
                head = "imported" if gen is not None else "none (discriminator only: pre-training adds a fresh generator)"
                sizes = _electra_sizes(ck.config, gen.config if gen else None, cfg.model.electra_max_positions)
        cfg.task.data = str(out_dir)  # where dict.txt will be once the directory is in place
        _save_checkpoint(work / "model.pt", cfg, model)
        sizes.pop("tokens_per_sample")  # a task field; the recipes read max_positions
        info = {"source": str(ck.path), "architecture": ck.arch, "generator": str(gen.path) if gen else None,
                "lowercase": ck.lowercase, "fairseq_arch": cfg.model._name, "mlm_head": head,
                "model_args": sizes}
        with open(work / "import.json", "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
    logger.info(f"imported {ck.arch} from {ck.path} into {out_dir} (model.pt, dict.txt, vocab.txt)")
    return out_dir


# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------
def _hf_vocab_order(symbols: List[str], vocab_file: Optional[Path]) -> Tuple[List[str], List[int]]:
    """(HF vocabulary, fairseq row of each HF id). With ``vocab_file`` (the original vocab.txt,
    e.g. the import's) the original ids come back; without it, fairseq's row order is kept."""
    names = hf_vocab_from_dictionary(symbols)
    if vocab_file is None:
        return names, list(range(len(names)))
    with open(vocab_file, encoding="utf-8") as f:
        vocab = [line.rstrip("\r\n") for line in f]
    while vocab and vocab[-1] == "":
        vocab.pop()
    row = {t: i for i, t in enumerate(names)}
    if len(vocab) != len(names) or set(vocab) != set(row):
        raise ConversionError(
            f"--vocab {vocab_file} ({len(vocab)} entries) is not the model's vocabulary ({len(names)} entries "
            "in its dict.txt); give the vocab.txt written by the import, or leave --vocab out"
        )
    return vocab, [row[t] for t in vocab]


def _write_hf(out: Path, config: dict, tensors: Dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    with open(out / "config.json", "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    save_file({k: v.detach().float().contiguous().clone() for k, v in tensors.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})


def _write_wordpiece(out: Path, vocab: List[str], lowercase: bool, max_length: int) -> None:
    """vocab.txt and a tokenizer_config.json whose ``model_max_length`` is the position table's
    size: transformers' tokenizers then truncate (``truncation=True``, pipelines) to what the
    model can take instead of passing a longer input that fails inside the model."""
    with open(out / "vocab.txt", "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    tok_cfg = {"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase, "unk_token": "[UNK]",
               "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
               "model_max_length": int(max_length)}
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(tok_cfg, f, indent=2)


def _common_config(arch, model_type, vocab, hidden, layers, heads, ffn, act, eps, max_pos, dropout, attn_dropout, pad):
    if act not in FAIRSEQ_TO_HF_ACT:
        raise ConversionError(f"activation {act!r} has no HuggingFace counterpart ({', '.join(FAIRSEQ_TO_HF_ACT)})")
    return {
        "architectures": [arch], "model_type": model_type, "vocab_size": vocab, "hidden_size": hidden,
        "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": ffn,
        "hidden_act": FAIRSEQ_TO_HF_ACT[act], "layer_norm_eps": float(eps), "max_position_embeddings": max_pos,
        "hidden_dropout_prob": float(dropout), "attention_probs_dropout_prob": float(attn_dropout),
        "pad_token_id": pad, "initializer_range": 0.02, "tie_word_embeddings": True,
    }


def _export_electra(model, symbols, vocab_file, out: Path, lowercase: bool) -> List[str]:
    c = model.cfg
    s = {k: v for k, v in model.state_dict().items()}
    vocab, rows = _hf_vocab_order(symbols, vocab_file)
    rows_t = torch.tensor(rows)
    pad = model.padding_idx
    E, H = c.electra_embed_dim, c.electra_hidden_dim
    emb = {
        "electra.embeddings.word_embeddings.weight": s["embeddings.embed_tokens.weight"][rows_t],
        "electra.embeddings.position_embeddings.weight": s["embeddings.embed_positions.weight"][pad + 1:],
        "electra.embeddings.token_type_embeddings.weight": torch.zeros(2, E),
        "electra.embeddings.LayerNorm.weight": s["embeddings.layer_norm.weight"],
        "electra.embeddings.LayerNorm.bias": s["embeddings.layer_norm.bias"],
    }
    max_pos = emb["electra.embeddings.position_embeddings.weight"].size(0)
    hf_pad = vocab.index("[PAD]")
    act = str(c.electra_activation_fn)
    if act != "gelu":
        raise ConversionError(f"ELECTRA with --electra-activation-fn {act}: HuggingFace's ELECTRA heads use erf GELU")

    def stack(prefix, hidden, layers, heads, ffn, arch):
        t = dict(emb)
        t.update(_fairseq_to_hf(s, _layer_table("electra.encoder.layer.", prefix + "layers.", layers)))
        if prefix + "project.weight" in s:
            t.update(_fairseq_to_hf(s, ELECTRA_PROJECTION, fs_base=prefix))
        conf = _common_config(arch, "electra", len(vocab), hidden, layers, heads, ffn, act, c.electra_layernorm_eps,
                              max_pos, c.electra_dropout, c.electra_attention_dropout, hf_pad)
        conf.update({"embedding_size": E, "type_vocab_size": 2, "summary_type": "first", "summary_use_proj": True,
                     "summary_activation": "gelu", "summary_last_dropout": 0.1})
        return t, conf

    t, conf = stack("discriminator.", H, c.electra_layers, c.electra_heads, c.electra_ffn_dim, "ElectraForPreTraining")
    t.update(_fairseq_to_hf(s, DISCRIMINATOR_HEAD))
    _write_hf(out, conf, t)
    _write_wordpiece(out, vocab, lowercase, max_pos)
    written = ["ElectraForPreTraining"]
    if model.generator is not None:
        g = out / "generator"
        g.mkdir()
        t, conf = stack("generator.", c.electra_gen_hidden_dim, c.electra_gen_layers, c.electra_gen_heads,
                        c.electra_gen_ffn_dim, "ElectraForMaskedLM")
        t.update(_fairseq_to_hf(s, GENERATOR_HEAD))
        t["generator_lm_head.bias"] = s["generator_bias"][rows_t]
        _write_hf(g, conf, t)
        _write_wordpiece(g, vocab, lowercase, max_pos)
        written.append("ElectraForMaskedLM (generator/)")
    return written


def _export_roberta_family(model, symbols, vocab_file, out: Path, lowercase: bool, dict_txt: Path,
                           gpt2_files) -> List[str]:
    from truneg_fairseq.models.bert import BertModel

    a = model.args
    s = model.state_dict()
    enc = "encoder.sentence_encoder."
    is_bert = isinstance(model, BertModel)
    pad = model.encoder.sentence_encoder.padding_idx
    table = s[enc + "embed_positions.weight"]
    if is_bert:
        vocab, rows = _hf_vocab_order(symbols, vocab_file)
        prefix, arch, mtype = "bert.", "BertForMaskedLM", "bert"
        positions, types = table[pad + 1:], s["bert_segment_offsets"]
        eps, hf_pad = a.bert_layernorm_eps, vocab.index("[PAD]")
    else:
        if vocab_file is not None:
            raise ConversionError("--vocab is for WordPiece (BERT/ELECTRA) checkpoints; a RoBERTa export keeps fairseq's ids")
        vocab, rows = list(symbols), list(range(len(symbols)))
        prefix, arch, mtype = "roberta.", "RobertaForMaskedLM", "roberta"
        # HF's RoBERTa counts positions from padding_idx + 1 exactly as fairseq does
        positions, types = table, torch.zeros(1, table.size(1))
        eps, hf_pad = 1e-5, pad
    rows_t = torch.tensor(rows)
    words = s[enc + "embed_tokens.weight"][rows_t]
    t = {
        prefix + "embeddings.word_embeddings.weight": words,
        prefix + "embeddings.position_embeddings.weight": positions,
        prefix + "embeddings.token_type_embeddings.weight": types,
        prefix + "embeddings.LayerNorm.weight": s[enc + "layernorm_embedding.weight"],
        prefix + "embeddings.LayerNorm.bias": s[enc + "layernorm_embedding.bias"],
    }
    t.update(_fairseq_to_hf(s, _layer_table(prefix + "encoder.layer.", enc + "layers.", a.encoder_layers)))
    t.update(_fairseq_to_hf(s, BERT_MLM_HEAD if is_bert else ROBERTA_MLM_HEAD))
    t[("cls.predictions." if is_bert else "lm_head.") + "bias"] = s["encoder.lm_head.bias"][rows_t]
    untied = (s["encoder.lm_head.weight"] - s[enc + "embed_tokens.weight"]).abs().max().item() if (
        s["encoder.lm_head.weight"].shape == s[enc + "embed_tokens.weight"].shape) else 1.0
    if untied > 0:
        raise ConversionError("the checkpoint's masked-LM output projection is not tied to its embeddings "
                              "(--untie-weights-roberta); HuggingFace's masked-LM heads are tied")
    conf = _common_config(arch, mtype, len(vocab), a.encoder_embed_dim, a.encoder_layers, a.encoder_attention_heads,
                          a.encoder_ffn_embed_dim, a.activation_fn, eps, positions.size(0), a.dropout,
                          a.attention_dropout, hf_pad)
    conf["type_vocab_size"] = types.size(0)
    if not is_bert:
        conf.update({"bos_token_id": 0, "eos_token_id": 2})
    elif s["bert_pooler_weight"].abs().max() > 0:  # the source had a pooler (BertModel's pooled output)
        t.update(_fairseq_to_hf(s, BERT_POOLER, hf_base="bert."))
    _write_hf(out, conf, t)
    if is_bert:
        _write_wordpiece(out, vocab, lowercase, positions.size(0))
    else:  # fairseq's positions start after padding_idx, as HF RoBERTa's do
        _write_roberta_vocab(out, symbols, dict_txt, gpt2_files, positions.size(0) - pad - 1)
    return [arch]


def _write_roberta_vocab(out: Path, symbols: List[str], dict_txt: Path, gpt2_files, max_length: int) -> None:
    """fairseq's dict (always) and, with GPT-2's encoder.json + vocab.bpe, the byte-level BPE files
    ``transformers``' RoBERTa tokenizer reads (vocab.json maps BPE strings to the model's rows)."""
    shutil.copyfile(dict_txt, out / "dict.txt")
    if not gpt2_files:
        logger.warning("RoBERTa export without --gpt2-encoder-json/--gpt2-vocab-bpe: only dict.txt is written; "
                       "give them to also write vocab.json and merges.txt")
        return
    encoder_json, vocab_bpe = gpt2_files
    gpt2 = _read_json(Path(encoder_json))
    by_id = {v: k for k, v in gpt2.items()}
    vocab = {}
    for row, sym in enumerate(symbols):
        if sym.isdigit() and int(sym) in by_id:
            vocab[by_id[int(sym)]] = row
        elif row < 4 or sym == "<mask>":
            vocab[sym] = row
        else:
            raise ConversionError(f"dictionary entry {sym!r} (row {row}) is not a GPT-2 BPE id of {encoder_json}")
    with open(out / "vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    shutil.copyfile(vocab_bpe, out / "merges.txt")
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "RobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>",
                   "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>",
                   "model_max_length": int(max_length)}, f, indent=2)


def _recorded_lowercase(checkpoint, vocab_file, symbols) -> bool:
    """Whether the exported tokenizer lower-cases: as the import recorded it, else as the
    vocabulary shows (lower-case only when no entry has an upper-case letter), the rule the
    plugin's own WordPiece applies (``--lowercase auto``)."""
    from truneg_fairseq.text import uncased

    for d in (Path(checkpoint).parent, Path(vocab_file).parent if vocab_file else None):
        if d is not None and (d / "import.json").is_file() and _read_json(d / "import.json").get("lowercase") is not None:
            return bool(_read_json(d / "import.json")["lowercase"])
    vocab = symbols
    if vocab_file is not None and Path(vocab_file).is_file():
        vocab = Path(vocab_file).read_text(encoding="utf-8").splitlines()
    return uncased([t for t in vocab if not (t.startswith("<") and t.endswith(">"))])


def export_hf(checkpoint, hf_dir, vocab_file=None, data=None, lowercase: Optional[bool] = None,
              gpt2_files: Optional[Tuple[str, str]] = None) -> List[str]:
    """Write a plugin ELECTRA, BERT or fairseq RoBERTa checkpoint as a HuggingFace directory;
    returns the architectures written. ``vocab_file`` restores the original WordPiece ids;
    ``lowercase`` defaults to the import's record (``import.json``), else to what the
    vocabulary shows (:func:`_recorded_lowercase`). The checkpoint is read by
    :func:`~truneg_fairseq.checkpoints.load_for_inference`, as every script reads one: a missing or
    unusable file is its :class:`~truneg_fairseq.checkpoints.CheckpointError`."""
    from fairseq.models.roberta import RobertaModel

    from truneg_fairseq.models.bert import BertModel
    from truneg_fairseq.models.electra import ElectraModel

    models, cfg, task = load_for_inference(checkpoint, data)
    model = models[0]
    symbols = list(task.source_dictionary.symbols)
    wordpiece = isinstance(model, (ElectraModel, BertModel))
    if vocab_file is None and wordpiece and (Path(checkpoint).parent / "vocab.txt").is_file():
        vocab_file = Path(checkpoint).parent / "vocab.txt"  # an imported directory exported as it is
    if lowercase is None:
        lowercase = _recorded_lowercase(checkpoint, vocab_file, symbols)
    if getattr(model, "classification_heads", None):
        logger.warning(f"classification heads {', '.join(model.classification_heads)} are not exported")
    hf_dir = Path(hf_dir).resolve()
    inputs = {"CHECKPOINT": checkpoint, "--vocab": vocab_file, "--data": data,
              "--gpt2-encoder-json": gpt2_files and gpt2_files[0], "--gpt2-vocab-bpe": gpt2_files and gpt2_files[1]}
    with atomic_dir(hf_dir, "convert_hf.py export", inputs=inputs) as work, torch.no_grad():
        if isinstance(model, ElectraModel):
            written = _export_electra(model, symbols, vocab_file, work, lowercase)
        elif isinstance(model, RobertaModel):
            dict_txt = Path(str(cfg.task.data).split(os.pathsep)[0]) / "dict.txt"
            written = _export_roberta_family(model, symbols, vocab_file, work, lowercase, dict_txt, gpt2_files)
        else:
            raise ConversionError(f"{checkpoint} holds a {type(model).__name__}; export supports the plugin's "
                                  "electra and bert models and fairseq's roberta")
    logger.info(f"exported {checkpoint} to {hf_dir}: {', '.join(written)}")
    return written
