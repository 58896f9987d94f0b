"""What ``truneg-hf-train`` reads, checked before any work: a local HuggingFace model directory
(nothing is downloaded; a hub id is one error saying how to make the directory), its
architecture and positions (the text: :mod:`truneg_fairseq.hf.text_inputs`). ``cfg`` is the
command's :class:`~truneg_fairseq.pipelines.hf_train.HFTrainConfig` (any object with its
fields)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

from truneg_fairseq.errors import HFTrainError

logger = logging.getLogger(__name__)


# ---- inputs -----------------------------------------------------------------------------------
def local_model_dir(path: str, flag: str) -> Path:
    """``path`` as a local HF model directory (config.json inside), else one clear error."""
    from truneg_fairseq.hf.model_dir import not_local_message, wordpiece_problem

    p = Path(path)
    if p.is_dir() and (p / "config.json").is_file():
        problem = wordpiece_problem(p)
        if problem:
            raise HFTrainError(problem)
        return p
    if p.is_dir() and all(
        (p / m / "config.json").is_file() for m in ("discriminator", "generator")
    ):
        raise HFTrainError(
            f"{flag} {path} holds an ELECTRA pair (its discriminator/ and generator/): give "
            f"{p / 'discriminator'} --generator {p / 'generator'}"
        )
    if p.is_dir():
        raise HFTrainError(f"{flag} {path} has no config.json: give a save_pretrained directory")
    raise HFTrainError(not_local_message(path, flag))


def check_architecture(
    model_dir: Path, generator: Optional[str], allow_fresh_head: bool = False
) -> None:
    """Refuse, from config.json, a model that has no masked-LM head to continue (an encoder
    without one, e.g. ``BertModel``, only with ``allow_fresh_head``: a new head is trained)."""
    with open(model_dir / "config.json", encoding="utf-8") as f:
        archs = json.load(f).get("architectures") or []
    disc = any(a == "ElectraForPreTraining" for a in archs)
    if disc and not generator:
        raise HFTrainError(
            f"{model_dir} holds ElectraForPreTraining (a discriminator): ELECTRA pre-training "
            "needs its generator too: --generator GEN_DIR (ElectraForMaskedLM)"
        )
    if generator and not disc:
        raise HFTrainError(
            f"--generator is for an ELECTRA discriminator MODEL_DIR; {model_dir} holds "
            f"{', '.join(archs) or 'an unnamed architecture'}"
        )
    if archs and not disc and not any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs):
        if allow_fresh_head:
            logger.warning(
                f"{model_dir} holds {', '.join(archs)}, without a masked-LM head: "
                "--allow-fresh-head: a new head is initialised and trained"
            )
            return
        raise HFTrainError(
            f"{model_dir} holds {', '.join(archs)}, a model without a masked-LM head: continue "
            "a *ForMaskedLM (or BERT's *ForPreTraining) checkpoint of the same model, or pass "
            "--allow-fresh-head to train a new head on this encoder"
        )


def load_models(cfg):
    """(tokenizer, masked-LM model or generator, discriminator or None), checked."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from truneg_fairseq.hf.collator import TokenizerWithoutMaskError, check_tokenizer

    model_dir = local_model_dir(cfg.model_dir, "MODEL_DIR")
    check_architecture(model_dir, cfg.generator, cfg.allow_fresh_head)
    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as e:
        raise HFTrainError(
            f"no tokenizer in {model_dir} ({str(e).splitlines()[0][:160]})"
        ) from None
    try:
        check_tokenizer(tok, f"the tokenizer of {model_dir}")
    except TokenizerWithoutMaskError as e:
        raise HFTrainError(str(e)) from None
    if cfg.generator:
        from transformers import ElectraForMaskedLM, ElectraForPreTraining

        gen_dir = local_model_dir(cfg.generator, "--generator")
        disc = ElectraForPreTraining.from_pretrained(str(model_dir), local_files_only=True)
        mlm, info = ElectraForMaskedLM.from_pretrained(
            str(gen_dir), local_files_only=True, output_loading_info=True
        )
        where = gen_dir
    else:
        disc = None
        try:
            mlm, info = AutoModelForMaskedLM.from_pretrained(
                str(model_dir), local_files_only=True, output_loading_info=True
            )
        except ValueError as e:  # a model type without a masked-LM class in transformers
            raise HFTrainError(
                f"{model_dir}: no masked-LM model of its type ({str(e).splitlines()[0][:160]})"
            ) from None
        where = model_dir
    missing = sorted(info.get("missing_keys") or [])
    base = getattr(mlm, "base_model_prefix", "") + "."
    encoder = [k for k in missing if base != "." and k.startswith(base)]
    if encoder and cfg.allow_fresh_head:  # not a head to train: the encoder would start random
        raise HFTrainError(
            f"{where} lacks {len(encoder)} encoder weights of {type(mlm).__name__} "
            f"({', '.join(encoder[:3])}{', ...' if len(encoder) > 3 else ''}): it is not a "
            "checkpoint of this model"
        )
    if missing and cfg.allow_fresh_head:
        logger.info(
            f"--allow-fresh-head: {len(missing)} head weights start new: {', '.join(missing)}"
        )
    if missing and not cfg.allow_fresh_head:
        raise HFTrainError(
            f"{where} lacks {len(missing)} weights of {type(mlm).__name__} ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): its masked-LM head would start random. Give "
            "a checkpoint with its head, or pass --allow-fresh-head to train one from scratch"
        )
    return tok, mlm, disc


def position_limit(model) -> Optional[int]:
    """The most tokens a row of ``model`` can hold: its learned absolute position embeddings
    (RoBERTa's family numbers positions from ``padding_idx + 1``); None without them (relative
    or rotary positions)."""
    emb = getattr(getattr(model, "base_model", model), "embeddings", None)
    table = getattr(emb, "position_embeddings", None)
    if not isinstance(getattr(table, "num_embeddings", None), int):
        return None
    offset = emb.padding_idx + 1 if isinstance(getattr(emb, "padding_idx", None), int) else 0
    return table.num_embeddings - offset


def check_seq_len(cfg, models) -> None:
    """Refuse, before the first step, a ``--seq-len`` longer than a model's positions (the first
    long batch would fail inside the model)."""
    for where, model in models:
        limit = position_limit(model)
        if limit is not None and cfg.seq_len > limit:
            n = model.config.max_position_embeddings
            raise HFTrainError(
                f"--seq-len {cfg.seq_len} is above the limit of {where} ({type(model).__name__}: "
                f"{limit} tokens a row, max_position_embeddings {n}): give --seq-len {limit} or "
                "less"
            )
