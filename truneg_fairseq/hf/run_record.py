"""The settings a ``truneg-hf-train`` run is trained with, recorded with each checkpoint
(:data:`RECORD`, a small JSON written atomically) and compared on a resume: the model's and the
generator's path and fingerprint, the objective, the masking, the synonym table's fingerprint,
the sequence length, the batch, the optimisation and the objectives' weights -- everything that
changes the numbers (``--max-steps``, ``--save-steps``, logging and evaluation flags may
change). A resume with other settings is one :class:`OutputDirError` naming each setting's
flag, the recorded and the given value, and how to start afresh."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from truneg_fairseq.core.objectives import all_params
from truneg_fairseq.core.objectives.electra_rtd import RTD_PARAMS
from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.outputs import atomic_open

OWNER = "truneg-hf-train"
RECORD = "truneg_run.json"  # in each checkpoint-N: the settings of the run that wrote it
AFRESH = "start afresh with --no-resume and a new --output-dir"

# the setting of a record -> the flag that sets it (for the messages)
FLAGS = {
    "model": "MODEL_DIR",
    "generator": "--generator",
    "objective": "--objective",
    "mask_prob": "--mask-prob",
    "leave_unmasked_prob": "--leave-unmasked-prob",
    "random_token_prob": "--random-token-prob",
    "max_predictions": "--max-predictions",
    "seq_len": "--seq-len",
    "synonym_table": "--synonym-table",
    "seed": "--seed",
    "batch_size": "--batch-size",
    "grad_accum": "--grad-accum",
    "processes": "the number of processes (torchrun --nproc_per_node)",
    "lr": "--lr",
    "warmup_steps": "--warmup-steps",
    "weight_decay": "--weight-decay",
    "max_grad_norm": "--max-grad-norm",
}
# and every objective's parameter and the discriminator term's (recorded after them): --sr-weight,
# --kl-weight, --kl-grad-original, --gen-weight, --disc-weight, --rtd-synonym-policy, ...

# files of a model directory that are not the model (a checkpoint's training state)
_NOT_MODEL = {"trainer_state.json", "training_args.bin", RECORD}


def run_settings(cfg, table, processes: int, keep: float, rand: float) -> dict:
    """What the run is trained with, recorded with every checkpoint and compared on a resume
    (:data:`FLAGS`): everything that changes the numbers."""
    return {
        "model": model_fingerprint(cfg.model_dir),
        "generator": model_fingerprint(cfg.generator) if cfg.generator else None,
        "objective": cfg.objective,
        "mask_prob": cfg.mask_prob,
        "leave_unmasked_prob": keep,
        "random_token_prob": rand,
        "max_predictions": cfg.max_predictions,
        "seq_len": cfg.seq_len,
        "synonym_table": table.content_fingerprint() if table is not None else None,
        "seed": cfg.seed,
        "batch_size": cfg.batch_size,
        "grad_accum": cfg.grad_accum,
        "processes": processes,
        "lr": cfg.lr,
        "warmup_steps": cfg.warmup_steps,
        "weight_decay": cfg.weight_decay,
        "max_grad_norm": cfg.max_grad_norm,
        **{p.name: cfg.objective_params.get(p.name, p.default) for _, p in all_params()},
        **{p.name: getattr(cfg, p.name) for p in RTD_PARAMS},
    }


def _flag(key: str) -> str:
    """The flag that sets the setting ``key``."""
    params = {p.name: p for _, p in all_params()} | {p.name: p for p in RTD_PARAMS}
    return FLAGS.get(key) or (params[key].flag if key in params else key)


def _shown(value) -> str:
    if isinstance(value, dict) and "path" in value:
        return f"{value['path']} (sha256 {str(value.get('sha256'))[:12]})"
    return json.dumps(value)


def check_resume(checkpoint: os.PathLike, settings: dict) -> None:
    """:class:`OutputDirError` when ``checkpoint`` was trained with other ``settings`` (see
    :data:`FLAGS`); a model given under another path with the same fingerprint is the same."""
    recorded = json.loads((Path(checkpoint) / RECORD).read_text(encoding="utf-8"))["settings"]
    differ = []
    for key, given in settings.items():
        was = recorded.get(key)
        if isinstance(given, dict) and isinstance(was, dict):
            same = given.get("sha256") == was.get("sha256")
        else:
            same = was == given
        if not same:
            differ.append(f"{_flag(key)}: recorded {_shown(was)}, given {_shown(given)}")
    if differ:
        raise OutputDirError(
            f"{checkpoint} was trained with other settings ({'; '.join(differ)}): resume with the "
            f"recorded values, or {AFRESH}"
        )


def write_record(checkpoint: os.PathLike, settings: Optional[dict], run: Optional[str]) -> None:
    """The record of ``checkpoint``: the command, the run id of the output directory's marker
    (the folder is the run's) and the settings (None while the save is under way)."""
    data = {"command": OWNER, "settings": settings}
    data.update({"run": run} if run else {})
    with atomic_open(Path(checkpoint) / RECORD, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def model_fingerprint(path: os.PathLike) -> dict:
    """``{"path", "sha256"}`` of a model directory: the sha256 of its configuration, weights and
    tokenizer files (the top-level ``.json``, ``.safetensors``, ``.bin``, ``.txt`` and
    ``.model`` files, a checkpoint's training state left out), names and contents."""
    path = Path(os.path.abspath(path))
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if (
            f.suffix in (".json", ".safetensors", ".bin", ".txt", ".model")
            and f.name not in _NOT_MODEL
            and not f.name.startswith(".")
            and f.is_file()
        ):
            h.update(f"{f.name}\0".encode())
            with open(f, "rb") as src:
                for block in iter(lambda: src.read(1 << 22), b""):
                    h.update(block)
    return {"path": str(path), "sha256": h.hexdigest()}
