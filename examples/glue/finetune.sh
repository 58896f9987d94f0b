#!/usr/bin/env bash
# Fine-tune a pre-trained checkpoint on one GLUE task with fairseq-hydra-train.
#
#   bash examples/glue/finetune.sh TASK small|base|roberta_base GLUE_BIN CHECKPOINT [hydra overrides]
#
# TASK        CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE (GLUE_BIN/TASK from scripts/prepare_glue.py)
# small/base  ELECTRA discriminator of this plugin (lr 3e-4 / 1e-4); roberta_base: RoBERTa (lr 1e-5)
# The number of updates is derived from GLUE_BIN/TASK/meta.json: epochs x examples / 32, 10% warmup.
# SAVE_DIR (default checkpoints/glue/TASK), FP16= (empty) for fp32. Logs go to SAVE_DIR/train.log,
# which scripts/glue_table.py reads.
set -euo pipefail
TASK=${1:?usage: finetune.sh TASK small|base|roberta_base GLUE_BIN CHECKPOINT [overrides]}
SIZE=${2:?}; GLUE_BIN=${3:?}; CKPT=${4:?}
shift 4
REPO=$(cd "$(dirname "$0")/../.." && pwd)
# fairseq-hydra-train runs in its own directory: every path it gets is made absolute here
[ -f "$CKPT" ] || { echo "error: checkpoint $CKPT not found" >&2; exit 2; }
CKPT="$(cd "$(dirname "$CKPT")" && pwd)/$(basename "$CKPT")"
CONFIG=$(echo "$TASK" | tr 'A-Z' 'a-z' | tr -d '-')
[ -f "$REPO/examples/glue/config/$CONFIG.yaml" ] || { echo "error: unknown GLUE task '$TASK'" >&2; exit 2; }
[ -f "$GLUE_BIN/$TASK/meta.json" ] || { echo "error: $GLUE_BIN/$TASK/meta.json not found: run scripts/prepare_glue.py" >&2; exit 2; }
case "$SIZE" in
  small) MODEL=electra_small; LR=${LR:-3e-4} ;;
  base) MODEL=electra_base; LR=${LR:-1e-4} ;;
  roberta_base) MODEL=roberta_base; LR=${LR:-1e-5} ;;
  *) echo "error: size must be small, base or roberta_base" >&2; exit 2 ;;
esac
EPOCHS=$(grep -E '^  max_epoch:' "$REPO/examples/glue/config/$CONFIG.yaml" | awk '{print $2}')
BSZ=${BSZ:-32}
TOTAL=$(python -c "import json,sys; m=json.load(open(sys.argv[1])); print(max(1, -(-m['examples']['train'] // $BSZ) * $EPOCHS))" "$GLUE_BIN/$TASK/meta.json")
WARMUP=$(( TOTAL / 10 > 0 ? TOTAL / 10 : 1 ))
SAVE_DIR=${SAVE_DIR:-checkpoints/glue/$TASK}
mkdir -p "$SAVE_DIR"
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
FP16_FLAG=false; BF16_FLAG=false
if [ -z "${FP16+set}" ]; then  # FP16 unset: this GPU's mixed precision; FP16= (empty): fp32
  case "$(mixed_precision_flag)" in --bf16) BF16_FLAG=true ;; --fp16) FP16_FLAG=true ;; esac  # a CPU: fp32
elif [ -n "$FP16" ]; then FP16_FLAG=true; fi

exec fairseq-hydra-train --config-dir "$REPO/examples/glue/config" --config-name "$CONFIG" \
  task.data="$(cd "$GLUE_BIN/$TASK" && pwd)" checkpoint.restore_file="$CKPT" common.user_dir="$REPO/truneg_fairseq" \
  model._name="$MODEL" optimization.lr="[$LR]" dataset.batch_size="$BSZ" common.fp16="$FP16_FLAG" common.bf16="$BF16_FLAG" \
  lr_scheduler.total_num_update="$TOTAL" lr_scheduler.warmup_updates="$WARMUP" \
  checkpoint.save_dir="$(cd "$SAVE_DIR" && pwd)" common.log_file="$(cd "$SAVE_DIR" && pwd)/train.log" \
  hydra.run.dir="$(cd "$SAVE_DIR" && pwd)/hydra" "$@"
