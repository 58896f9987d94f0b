"""Checks of converted weights before anything is built or written: the sizes ``config.json``
gives against the weight shapes (a config that does not belong to its weights would build a
model of another size, or a huge one), attention heads that divide the width, and tensors that
hold NaN or infinity (a model that cannot be trained or evaluated, refused in either direction).
Every problem is one :class:`ConversionError` naming the file or tensor and the fix."""

import logging
import re
from pathlib import Path
from typing import Dict

import torch

from truneg_fairseq.errors import ConversionError

logger = logging.getLogger(__name__)

PROGRESS_EVERY = 200  # a progress line per this many tensors of a large model


def check_heads(config: dict, cfg_path) -> None:
    """``num_attention_heads`` must be at least 1 and divide ``hidden_size``; the sizes must
    be at least 1 (checked on config.json alone, before any weight is read)."""
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
        if config[key] < 1:
            raise ConversionError(f"{cfg_path}: {key} is {config[key]}; it must be at least 1")
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    if hidden % heads:
        raise ConversionError(
            f"{cfg_path}: num_attention_heads {heads} does not divide hidden_size {hidden} (each "
            "head takes an equal share of the width); use the config.json published with the weights"
        )


def _base(state: Dict[str, torch.Tensor]) -> str:
    """The prefix of the encoder's tensors ('', 'bert.' or 'electra.')."""
    for key in state:
        m = re.match(r"^(.*?)embeddings\.word_embeddings\.weight$", key)
        if m:
            return m.group(1)
    raise ConversionError("the weights hold no embeddings.word_embeddings.weight")


def check_sizes(config: dict, state: Dict[str, torch.Tensor], cfg_path) -> None:
    """Each size ``config.json`` gives must be the one the weights have: ``vocab_size``,
    ``embedding_size`` (else ``hidden_size``) and ``max_position_embeddings`` against the
    embedding tables, ``num_hidden_layers`` against the layers present, ``hidden_size`` and
    ``intermediate_size`` against the first layer's projections."""
    check_heads(config, cfg_path)
    base = _base(state)
    words = state[base + "embeddings.word_embeddings.weight"]
    pos = state.get(base + "embeddings.position_embeddings.weight")
    layer = base + "encoder.layer."
    found = sorted(
        {int(m.group(1)) for k in state for m in [re.match(re.escape(layer) + r"(\d+)\.", k)] if m}
    )
    query = state.get(layer + "0.attention.self.query.weight")
    inter = state.get(layer + "0.intermediate.dense.weight")
    emb = config.get("embedding_size") or config["hidden_size"]
    checks = [
        ("vocab_size", config.get("vocab_size"), words.shape[0], "word embedding rows"),
        ("embedding_size" if "embedding_size" in config else "hidden_size", emb, words.shape[1],
         "word embedding width"),
        ("max_position_embeddings", config.get("max_position_embeddings"),
         None if pos is None else pos.shape[0], "position embedding rows"),
        ("num_hidden_layers", config["num_hidden_layers"], len(found),
         f"layers {layer}0-{found[-1]}" if found else f"layers {layer}N"),
        ("hidden_size", config["hidden_size"], None if query is None else query.shape[0],
         "query projection width of layer 0"),
        ("intermediate_size", config["intermediate_size"], None if inter is None else inter.shape[0],
         "feed-forward width of layer 0"),
    ]  # fmt: skip
    for key, said, have, what in checks:
        if said is not None and have is not None and said != have:
            raise ConversionError(
                f"{cfg_path}: {key} is {said} but the weights have {have} ({what}): the config does "
                "not belong to these weights. Use the config.json published with them"
            )
    if found and found != list(range(len(found))):
        gaps = sorted(set(range(found[-1] + 1)) - set(found))
        raise ConversionError(
            f"{Path(cfg_path).parent}: the weights miss layer(s) {gaps[:5]} of {layer}0-{found[-1]}: "
            "incomplete weights; download them again"
        )


def check_finite(tensors: Dict[str, torch.Tensor], where, fix: str) -> None:
    """Every floating tensor of ``tensors`` must be finite: the first that holds NaN or
    infinity is one error naming it (``where``: the file or checkpoint; ``fix``: what to do).
    A progress line per :data:`PROGRESS_EVERY` tensors of a large model."""
    total = len(tensors)
    for i, (name, t) in enumerate(tensors.items(), 1):
        if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            kind = "NaN" if bool(torch.isnan(t).any()) else "infinite"
            raise ConversionError(
                f"{where}: tensor {name} holds {bad} {kind} value(s) of {t.numel()}; {fix}"
            )
        if total > PROGRESS_EVERY and (i % PROGRESS_EVERY == 0 or i == total):
            logger.info(f"{where}: {i} of {total} tensors checked")
