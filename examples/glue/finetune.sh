#!/usr/bin/env bash
# Fine-tune a pre-trained checkpoint on one GLUE task with fairseq-hydra-train.
#
#   bash examples/glue/finetune.sh TASK small|base|roberta_base GLUE_BIN CHECKPOINT [hydra overrides]
#
# TASK        CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE (GLUE_BIN/TASK from scripts/prepare_glue.py)
# small/base  the learning rate of an ELECTRA discriminator (3e-4 / 1e-4); roberta_base: of a
#             RoBERTa, BERT or CLINE encoder (1e-5). LR overrides it.
# CHECKPOINT  any checkpoint of the plugin (ELECTRA or CLINE pre-training, a continued or imported
#             BERT/RoBERTa): the model is the checkpoint's own, its architecture and every size
#             (positions included) read from it, so no size flag is needed; a CLINE checkpoint
#             fine-tunes as its backbone (the RTD head and task weights are dropped) and an ELECTRA
#             one as its discriminator. ARCH overrides the checkpoint's architecture.
# The learning-rate schedule follows the updates the run makes, counted from
# GLUE_BIN/TASK/meta.json's train examples, BSZ (32) sentences per batch, the GPUs,
# optimization.update_freq and optimization.max_epoch / max_update with the overrides given here
# (optimization.max_epoch=2 decays to 0 at the second epoch's last update); WARMUP updates of
# warm-up (default 10% of them). Examples longer than the model's positions are truncated (every
# split), so the logged validation and scripts/glue_predict.py score the same inputs.
# SAVE_DIR (default checkpoints/glue/TASK), FP16= (empty) for fp32. The run's config is written
# to SAVE_DIR/config/TASK.yaml (every path in it, so any directory name works; hydra overrides
# such as model.dropout=0.2 change any field). Logs go to SAVE_DIR/train.log, which
# scripts/glue_table.py reads; hydra's own files to SAVE_DIR/hydra (the working directory is
# left as it is).
set -euo pipefail
USAGE="usage: finetune.sh TASK small|base|roberta_base GLUE_BIN CHECKPOINT [overrides]"
TASK=${1:?$USAGE}; SIZE=${2:?$USAGE}; GLUE_BIN=${3:?$USAGE}; CKPT=${4:?$USAGE}
shift 4
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
PYTHON=${PYTHON:-python}
[ -f "$CKPT" ] || { echo "error: checkpoint $CKPT not found" >&2; exit 2; }
CONFIG=$(echo "$TASK" | tr 'A-Z' 'a-z' | tr -d '-')
[ -f "$REPO/examples/glue/config/$CONFIG.yaml" ] || { echo "error: unknown GLUE task '$TASK'" >&2; exit 2; }
[ -f "$GLUE_BIN/$TASK/meta.json" ] || { echo "error: $GLUE_BIN/$TASK/meta.json not found: run scripts/prepare_glue.py" >&2; exit 2; }
case "$SIZE" in
  small) LR=${LR:-3e-4} ;;
  base) LR=${LR:-1e-4} ;;
  roberta_base) LR=${LR:-1e-5} ;;
  *) echo "error: size must be small, base or roberta_base (it picks the learning rate)" >&2; exit 2 ;;
esac
SAVE_DIR=${SAVE_DIR:-checkpoints/glue/$TASK}
mkdir -p "$SAVE_DIR"
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
PRECISION=fp32
if [ -z "${FP16+set}" ]; then  # FP16 unset: this GPU's mixed precision; FP16= (empty): fp32
  case "$(mixed_precision_flag)" in --bf16) PRECISION=bf16 ;; --fp16) PRECISION=fp16 ;; esac  # a CPU: fp32
elif [ -n "$FP16" ]; then PRECISION=fp16; fi

case "${WARMUP:-0}" in
  *[!0-9]*) echo "error: WARMUP=$WARMUP: give a whole number of warm-up updates" >&2; exit 2 ;;
esac
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

# the run's config: the task's recipe config with the checkpoint's model, every path in it and
# the schedule of the updates the run makes with the overrides given here
"$PYTHON" - "$REPO" "$CONFIG" "$CKPT" "$GLUE_BIN/$TASK" "$SAVE_DIR" "$LR" "${BSZ:-32}" \
  "$PRECISION" "${ARCH:-}" "${WARMUP:-}" "$@" <<'EOF'
import os, sys
repo, config, ckpt, data, save_dir, lr, bsz, precision, arch, warmup = sys.argv[1:11]
from truneg_fairseq.pipelines.glue_run_config import GlueFinetuneError, write_run_config
try:
    run = write_run_config(
        os.path.join(repo, "examples", "glue", "config", config + ".yaml"),
        os.path.join(save_dir, "config", config + ".yaml"), ckpt, data, save_dir,
        os.path.join(repo, "truneg_fairseq"), float(lr), int(bsz), precision, arch or None,
        overrides=sys.argv[11:], warmup=int(warmup) if warmup else None)
except GlueFinetuneError as e:
    sys.exit(f"error: {e}")
print(f"finetune.sh: {run['arch']} from the checkpoint, {run['positions']} positions, "
      f"{run['updates']} updates ({run['warmup']} of warm-up), {precision}", file=sys.stderr)
EOF

# fairseq-hydra-train, without hydra 1.3's deprecation notices and DEBUG lines
exec "$PYTHON" -c 'import sys; from truneg_fairseq.cli.common import hydra_train; hydra_train(sys.argv[1:])' \
  --config-dir "$(cd "$SAVE_DIR/config" && pwd)" --config-name "$CONFIG" "$@"
