"""What both importers (import_bert.py, import_electra.py, import_dir.py) share: HF embeddings
and layers as fairseq tensors (:func:`embedding_tensors`, :func:`layer_tensors`), the fairseq
model built as fairseq-train builds it (:func:`build_fairseq`), filled with every tensor checked
(:func:`fill_model`), and saved as a checkpoint fairseq-train can continue
(:func:`save_fresh_checkpoint`).

Positions: BERT's 0-based row ``i`` is fairseq's row ``padding_idx + 1 + i``; the token-type
row of segment 0 is added to every position row (fairseq feeds one segment)."""

import logging
import re
from pathlib import Path
from typing import Dict

import torch

from truneg_fairseq.checkpoints import build_model
from truneg_fairseq.convert.hf_dir import HFCheckpoint
from truneg_fairseq.convert.keys import _hf_to_fairseq, _layer_table, _take
from truneg_fairseq.errors import ConversionError

logger = logging.getLogger(__name__)


def layer_tensors(
    state, hf_prefix: str, fs_prefix: str, n: int, where: str
) -> Dict[str, torch.Tensor]:
    """The ``n`` transformer layers under ``hf_prefix`` (``...layer.0.`` on) as fairseq tensors
    under ``fs_prefix``; weights holding more layers than ``n`` (config.json's
    ``num_hidden_layers``) are refused (:class:`ConversionError`, naming ``where``)."""
    found = {
        int(m.group(1))
        for k in state
        for m in [re.match(re.escape(hf_prefix) + r"(\d+)\.", k)]
        if m
    }
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
    table[padding_idx + 1 :] = pos + type0
    return table


def embedding_tensors(state, prefix, order, padding_idx, where):
    """The embeddings under ``prefix`` as fairseq tensors: ``tokens`` (rows in fairseq's
    ``order``), ``positions`` (the table fairseq reads, see the module's docstring),
    ``segment_offsets`` (every token-type row less row 0), ``ln_w``/``ln_b`` (the embedding
    LayerNorm)."""
    words = _take(state, prefix + "word_embeddings.weight", where)
    types = _take(state, prefix + "token_type_embeddings.weight", where)
    return {
        "tokens": words[order],
        "positions": _positions(
            _take(state, prefix + "position_embeddings.weight", where), types[0], padding_idx
        ),
        "segment_offsets": types - types[0:1],
        "ln_w": _take(state, prefix + "LayerNorm.weight", where),
        "ln_b": _take(state, prefix + "LayerNorm.bias", where),
    }


def check_vocab_size(ck: HFCheckpoint, rows: int):
    """Refuse (:class:`ConversionError`) a checkpoint whose vocabulary or config ``vocab_size``
    is not the ``rows`` of its word embedding."""
    if len(ck.vocab) != rows or ck.config.get("vocab_size", rows) != rows:
        raise ConversionError(
            f"{ck.path}: the vocabulary has {len(ck.vocab)} entries but the word embedding has {rows} rows "
            f"(config vocab_size {ck.config.get('vocab_size')}); use the vocabulary the model was trained with"
        )


def build_fairseq(task: str, arch: str, sizes: Dict[str, object], data_dir: Path):
    """fairseq (cfg, task, model) for ``--task task --arch arch`` with the model fields in
    ``sizes`` (typed values read from config.json, set on the config object: nothing read from a
    file passes through a command line), as fairseq-train builds them."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import truneg_fairseq

    truneg_fairseq.register()
    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(
        parser, [str(data_dir), "--cpu", "--task", task, "--arch", arch]
    )
    for key, value in sizes.items():  # keys: fields of the arch's model (and task) config
        setattr(ns, key, value)
    cfg = convert_namespace_to_omegaconf(ns)
    task_ = tasks.setup_task(cfg.task)
    return cfg, task_, build_model(cfg, task_)


def fill_model(model, converted: Dict[str, torch.Tensor]) -> None:
    """Load ``converted`` into ``model``: every tensor must be given, except buffers the model
    keeps for itself (kept as built: e.g. the pooler of a source without one)."""
    own = model.state_dict()
    unknown = sorted(set(converted) - set(own))
    if unknown:
        raise ConversionError(f"internal mapping produced keys the model lacks: {unknown[:5]}")
    buffers = {
        n for n, _ in model.named_buffers()
    }  # the model's own bookkeeping (e.g. its LayerNorm eps)
    missing = [
        k for k in own if k not in converted and k not in buffers and not k.endswith(".version")
    ]
    if missing:
        raise ConversionError(
            f"the weights give no value for {len(missing)} tensors, e.g. {missing[:5]}"
        )
    for k, v in converted.items():
        if own[k].shape != v.shape:
            raise ConversionError(
                f"tensor {k}: the weights have shape {tuple(v.shape)}, the model {tuple(own[k].shape)}"
            )
    merged = dict(own)
    merged.update(converted)
    model.load_state_dict(merged, strict=True)


def save_fresh_checkpoint(path: Path, cfg, model) -> None:
    """Write ``model`` with its ``cfg`` at ``path`` as a checkpoint fairseq-train continues from
    (no optimizer state, update 0, epoch 1)."""
    from omegaconf import OmegaConf

    state = {
        "args": None,
        "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "model": model.state_dict(),
        "criterion": {},
        "optimizer_history": [
            {
                "criterion_name": "none",
                "optimizer_name": "none",
                "lr_scheduler_state": {"best": None},
                "num_updates": 0,
            }
        ],
        "task_state": {},
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "version": 2}},
        "last_optimizer_state": None,
    }
    torch.save(state, path)


def warn_untied(state, key, embeddings, what):
    """Log a warning when ``state[key]`` (the ``what`` weight, tied to the word embeddings by
    config.json) differs from ``embeddings``: the import keeps the embeddings, as transformers
    does."""
    if key in state and state[key].shape == embeddings.shape:
        diff = (state[key].float() - embeddings).abs().max().item()
        if diff > 0:
            logger.warning(
                f"the {what} weight differs from the word embeddings (max {diff:.3g}); "
                "config.json ties them (tie_word_embeddings), so transformers uses the word "
                "embeddings, and so does the fairseq model"
            )
