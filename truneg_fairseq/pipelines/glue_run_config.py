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
* **The schedule follows the run**: the learning rate's ``total_num_update`` is the number of
  updates the run makes (:func:`planned_updates`: the train examples of ``meta.json`` in
  batches of ``dataset.batch_size``, over the workers, grouped by ``optimization.update_freq``,
  for ``optimization.max_epoch`` epochs, at most ``optimization.max_update``), read from the
  recipe config with the run's hydra overrides applied, so ``optimization.max_epoch=2`` decays
  the rate to 0 at the run's last update. The warm-up is 10% of it, or ``WARMUP`` updates.
* **Hydra's run directory** is ``SAVE_DIR/hydra`` and the working directory stays where the
  recipe was started (``hydra.job.chdir: false``): nothing is written into the directory the
  recipe runs from.
"""

import argparse
import json
import math
import os
import re
from typing import Dict, List, Optional, Sequence

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


# set by the recipe from the run itself: an override of them would part the schedule from the run
SCHEDULE_KEYS = {
    "lr_scheduler.total_num_update": "the run's length: optimization.max_epoch=N or "
    "optimization.max_update=N",
    "lr_scheduler.warmup_updates": "the warm-up: WARMUP=N (updates)",
}


def apply_overrides(cfg, overrides: Sequence[str]) -> None:
    """The hydra overrides among ``overrides`` (``key=value``, ``+key=value``, ``~key``: what
    fairseq-hydra-train will apply) applied to ``cfg``, so what the run will do can be read
    from it; options (``--cfg``, ...) and their values are left to hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from omegaconf import OmegaConf, open_dict

    texts = [o for o in overrides if "=" in o and not o.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(texts)
    except OverrideParseException as e:
        raise GlueFinetuneError(f"a hydra override: {e}") from None
    for o in parsed:
        key = o.key_or_group
        if key in SCHEDULE_KEYS:
            raise GlueFinetuneError(
                f"{key} is set from the updates the run makes; change {SCHEDULE_KEYS[key]}"
            )
        if "." not in key or key.startswith("hydra.") or o.is_sweep_override():
            continue  # a config group, hydra's own settings, a sweep: nothing the schedule reads
        with open_dict(cfg):
            if o.is_delete():
                parent, _, leaf = key.rpartition(".")
                node = OmegaConf.select(cfg, parent)
                if node is not None and leaf in node:
                    del node[leaf]
            else:
                OmegaConf.update(cfg, key, o.value(), merge=True, force_add=True)


def default_world_size() -> int:
    """The workers fairseq-hydra-train will train on: torchrun's ``WORLD_SIZE``, else fairseq's
    default (every visible GPU, at least one)."""
    if os.environ.get("WORLD_SIZE", "").isdigit():
        return max(1, int(os.environ["WORLD_SIZE"]))
    import torch

    return max(1, torch.cuda.device_count())


def planned_updates(cfg, train_examples: int, world_size: int) -> int:
    """The updates fairseq-train makes with ``cfg`` on ``train_examples`` sentences: batches of
    ``dataset.batch_size`` (every one kept: the plugin keeps the last, smaller batch) dealt
    out to ``world_size`` workers, grouped by the epoch's ``optimization.update_freq`` (the
    last group smaller unless ``skip_remainder_batch``), for ``optimization.max_epoch`` epochs,
    at most ``optimization.max_update``."""
    from omegaconf import OmegaConf

    def value(key, default):
        got = OmegaConf.select(cfg, key, default=default)
        return default if got is None else got

    if value("dataset.max_tokens", None):
        raise GlueFinetuneError(
            "dataset.max_tokens: the recipe counts its updates in batches of sentences; give "
            "BSZ (or dataset.batch_size) instead"
        )
    bsz = int(value("dataset.batch_size", 0))
    if bsz <= 0:
        raise GlueFinetuneError(f"dataset.batch_size {bsz}: give BSZ > 0 sentences per batch")
    epochs = int(value("optimization.max_epoch", 0))
    max_update = int(value("optimization.max_update", 0))
    if epochs <= 0 and max_update <= 0:
        raise GlueFinetuneError(
            "the run has no end: give optimization.max_epoch=N or optimization.max_update=N"
        )
    freq = value("optimization.update_freq", [1])  # fairseq's is a list: one per epoch
    freq = [int(freq)] if isinstance(freq, (int, float, str)) else [int(f) for f in freq] or [1]
    skip = bool(value("optimization.skip_remainder_batch", False))
    per_worker = math.ceil(math.ceil(train_examples / bsz) / world_size)
    if epochs <= 0:
        return max_update
    total = 0
    for epoch in range(1, epochs + 1):
        f = freq[epoch - 1] if epoch <= len(freq) else freq[-1]
        total += per_worker // f if skip else math.ceil(per_worker / f)
    return min(total, max_update) if max_update > 0 else total


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
    overrides: Sequence[str] = (),
    warmup: Optional[int] = None,
    world_size: Optional[int] = None,
) -> Dict[str, object]:
    """Write ``out``: the recipe config ``template`` with the model section of ``checkpoint``,
    the paths, the learning rate, batch size, precision (fp32 | fp16 | bf16) and the schedule:
    :func:`planned_updates` of the config with the run's hydra ``overrides`` applied (they are
    not written: fairseq-hydra-train applies them), ``warmup`` updates of warm-up (default
    10%). ``world_size``: the workers (default :func:`default_world_size`). Returns a summary
    (arch, positions, updates, warmup) for the log."""
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
    OmegaConf.update(cfg, "dataset.batch_size", int(batch_size), merge=False)
    run = OmegaConf.create(OmegaConf.to_container(cfg))
    apply_overrides(run, overrides)
    workers = world_size or default_world_size()
    total = max(1, planned_updates(run, int(meta["examples"]["train"]), workers))
    if warmup is None:
        warmup = total // 10
    elif warmup < 0 or (warmup >= total and warmup > 0):
        raise GlueFinetuneError(
            f"WARMUP={warmup}: the warm-up must end before the run's last update (the run makes "
            f"{total} updates); give WARMUP between 0 and {total - 1}"
        )
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
        "lr_scheduler.warmup_updates": warmup,
        "hydra.run.dir": os.path.join(save_dir, "hydra"),
        "hydra.job.chdir": False,
    }
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, merge=False)
    with atomic_open(out) as f:
        f.write(OmegaConf.to_yaml(cfg))
    return {"arch": model["_name"], "positions": n_pos, "updates": total, "warmup": warmup}


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
