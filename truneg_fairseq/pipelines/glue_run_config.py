"""The configuration of one GLUE fine-tuning run (``examples/glue/finetune.sh``), written from
the task's recipe config and the checkpoint to fine-tune.

* **The model is the checkpoint's own**: its architecture (``cline_roberta_base``,
  ``electra_small``, ``bert_hf``, ...) and every model field it was trained with (layers, widths,
  heads, positions, LayerNorm epsilon), so a model of any size fine-tunes with no size flags.
  Every field is declared in the written config, so ``model.KEY=VALUE`` overrides any of them.
  Built for ``sentence_prediction``, a CLINE model is its backbone alone (the RTD head and task
  weights are dropped when the checkpoint loads) and an ELECTRA model its discriminator.
* **Positions**: ``task.max_positions`` is the model's position count (fairseq's
  ``sentence_prediction`` copies it into a RoBERTa/BERT model's config, so 512 would build a
  128-position BERT with a 512-row table), and examples longer than that are truncated
  (``task.shorten_method: truncate``) in every split: the validation of the run and
  ``scripts/glue_predict.py`` read the same inputs and score every example.
* **Paths** (data, checkpoint, save directory, log, plugin) are written into the config, not
  passed as hydra overrides, so spaces, commas, quotes and non-ASCII characters need no
  escaping; ``${`` (an OmegaConf interpolation) is refused.
"""

import argparse
import json
import math
import os
import re
from typing import Dict, List, Optional

from truneg_fairseq.errors import (
    GlueFinetuneError,  # noqa: F401  (defined in the one place of the errors)
)

# model fields that name files or switch on pre-training behaviour: never carried into fine-tuning
NOT_CARRIED = {
    "bert_sizes_from": None,
    "electra_sizes_from": None,
    "electra_embed_init": None,
    "truneg_embed_init": None,
    "bert_freeze_encoder": False,
    "electra_freeze_discriminator": False,
}
POSITION_FIELDS = ("electra_max_positions", "max_positions")
# a number (1e-05, -1), an activation or an arch name: one word that is no flag
_PLAIN = re.compile(r"^(-?[0-9][0-9.eE+-]*|[A-Za-z0-9_][A-Za-z0-9_.+-]*)$")


def model_fields(arch: str):
    """The names of the model fields of ``arch`` (its dataclass, or the flags of its add_args)."""
    # importing this module ran the package root: the plugin's architectures are registered
    from fairseq.models import (
        ARCH_MODEL_NAME_REGISTRY,
        ARCH_MODEL_REGISTRY,
        MODEL_DATACLASS_REGISTRY,
    )

    if arch not in ARCH_MODEL_REGISTRY:
        raise GlueFinetuneError(f"ARCH={arch} is not a fairseq architecture of the plugin")
    dc = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY[arch])
    if dc is not None:
        return [f for f in dc.__dataclass_fields__ if f != "_name"]
    parser = argparse.ArgumentParser(add_help=False)
    ARCH_MODEL_REGISTRY[arch].add_args(parser)
    return [a.dest for a in parser._actions if a.dest != "help"]


def checkpoint_model(checkpoint: str, arch: Optional[str] = None) -> Dict[str, object]:
    """The model section of a fine-tuning config for ``checkpoint``: ``_name`` (its arch, or
    ``arch``) and every model field the checkpoint records."""
    from truneg_fairseq.checkpoints import CheckpointError, read_checkpoint

    try:  # the plugin's checks of a checkpoint's config (its family, no evaluated values) apply
        state = read_checkpoint(checkpoint)
    except CheckpointError as e:
        raise GlueFinetuneError(str(e)) from None
    cfg = state.get("cfg")
    saved = cfg.get("model") if isinstance(cfg, dict) else getattr(cfg, "model", None)
    if saved is not None and not isinstance(saved, dict):
        saved = vars(saved) if isinstance(saved, argparse.Namespace) else dict(saved)
    if not saved or not (saved.get("_name") or saved.get("arch")):
        raise GlueFinetuneError(
            f"{checkpoint} records no model configuration (cfg.model): give a checkpoint saved "
            "by fairseq-train or scripts/convert_hf.py import"
        )
    name = arch or saved.get("_name") or saved.get("arch")
    section: Dict[str, object] = {"_name": name}
    for key in model_fields(name):
        value = saved.get(key)
        if key in NOT_CARRIED:
            value = NOT_CARRIED[key]
        if value is None or isinstance(value, (bool, int, float, str)):
            if value is not None:
                section[key] = value
    if not any(f in section for f in POSITION_FIELDS):
        raise GlueFinetuneError(
            f"{checkpoint} records no position count (max_positions / electra_max_positions)"
        )
    return section


def positions(model: Dict[str, object]) -> int:
    for f in POSITION_FIELDS:
        if f in model:
            return int(model[f])
    raise GlueFinetuneError("the model section has no position count")


def check_path(what: str, path: str) -> str:
    """``path`` made absolute; one that OmegaConf would read as an interpolation is refused."""
    if "${" in path:
        raise GlueFinetuneError(
            f"{what} {path}: '${{' in a path is read by hydra as an interpolation; rename the "
            "directory"
        )
    return os.path.abspath(path)


def write_run_config(
    template: str,
    out: str,
    checkpoint: str,
    data: str,
    save_dir: str,
    user_dir: str,
    lr: float,
    batch_size: int,
    precision: str = "fp32",
    arch: Optional[str] = None,
) -> Dict[str, object]:
    """Write ``out``: the recipe config ``template`` with the model section of ``checkpoint``,
    the paths, the learning rate, batch size, precision (fp32 | fp16 | bf16) and the schedule
    (the template's epochs over the train examples of ``data``/meta.json, 10% warm-up).
    Returns a summary (arch, positions, updates) for the log."""
    from omegaconf import OmegaConf

    from truneg_fairseq.outputs import atomic_open

    meta_path = os.path.join(data, "meta.json")
    if not os.path.isfile(meta_path):
        raise GlueFinetuneError(f"{meta_path} not found: run scripts/prepare_glue.py for the task")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    model = checkpoint_model(checkpoint, arch)
    cfg = OmegaConf.load(template)
    n_pos = positions(model)
    epochs = int(cfg.optimization.max_epoch)
    total = max(1, math.ceil(int(meta["examples"]["train"]) / batch_size) * epochs)
    save_dir = check_path("SAVE_DIR", save_dir)
    values = {
        "model": model,
        "task.data": check_path("GLUE_BIN", data),
        "task.max_positions": n_pos,
        "task.shorten_method": "truncate",
        "checkpoint.restore_file": check_path("CHECKPOINT", checkpoint),
        "checkpoint.save_dir": save_dir,
        "common.user_dir": check_path("the plugin", user_dir),
        "common.log_file": os.path.join(save_dir, "train.log"),
        "common.fp16": precision == "fp16",
        "common.bf16": precision == "bf16",
        "optimization.lr": [float(lr)],
        "dataset.batch_size": int(batch_size),
        "lr_scheduler.total_num_update": total,
        "lr_scheduler.warmup_updates": max(1, total // 10),
        "hydra.run.dir": os.path.join(save_dir, "hydra"),
    }
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, merge=False)
    with atomic_open(out) as f:
        f.write(OmegaConf.to_yaml(cfg))
    return {"arch": model["_name"], "positions": n_pos, "updates": total}


def size_flags(checkpoint: str) -> List[str]:
    """fairseq-train flags that build the model of ``checkpoint`` again: ``--arch`` and every
    size field it records (layers, widths, heads, positions, LayerNorm epsilon), for a recipe
    that continues a checkpoint of any size."""
    from truneg_fairseq.models.import_sizes import FIELD_TYPES

    model = checkpoint_model(checkpoint)
    flags = ["--arch", str(model["_name"])]
    for key, value in model.items():
        if key in FIELD_TYPES and key not in (
            "dropout",
            "attention_dropout",
            "electra_dropout",
            "electra_attention_dropout",
        ):
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    flags.append(flag)
                continue
            text = str(value)  # the schema checked it; a flag's value is one plain word
            if not _PLAIN.match(text):
                raise GlueFinetuneError(
                    f"{checkpoint}: {key} = {text[:80]!r} is not a plain value for {flag}; "
                    "use a checkpoint saved by fairseq-train or scripts/convert_hf.py import"
                )
            flags += [flag, text]
    return flags
