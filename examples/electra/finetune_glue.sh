#!/usr/bin/env bash
# Fine-tune an ELECTRA discriminator on a sentence(-pair) classification task with fairseq's own
# sentence_prediction task and criterion (the generator is left out when the checkpoint loads).
#
#   bash examples/electra/finetune_glue.sh small|base TASK_BIN CHECKPOINT NUM_CLASSES [flags]
#
# TASK_BIN is fairseq's sentence_prediction layout (input0/, [input1/], label/) binarized with
# the pre-training dict.txt. small|base picks the learning rate; the arch and every size
# (positions included) are read from CHECKPOINT, so a discriminator of any size (a continued
# import too) needs no size flag. Examples longer than the positions are truncated in every
# split (--shorten-method truncate), so scripts/glue_predict.py scores the inputs the log
# scored. ELECTRA paper settings: lr 3e-4 (small) / 1e-4 (base), batch 32,
# 3 epochs (10 for RTE and STS-B), warmup 10%; for STS-B add --regression-target and NUM_CLASSES 1.
set -euo pipefail
SIZE=${1:?usage: finetune_glue.sh small|base TASK_BIN CHECKPOINT NUM_CLASSES [flags]}
TASK_BIN=${2:?}; CHECKPOINT=${3:?}; NUM_CLASSES=${4:?}
shift 4
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
. "$REPO/examples/paths.sh"
case "$SIZE" in small) LR=${LR:-3e-4} ;; base) LR=${LR:-1e-4} ;;
  *) echo "error: size must be small or base (it picks the learning rate)" >&2; exit 2 ;; esac
[ -f "$CHECKPOINT" ] || { echo "error: checkpoint $CHECKPOINT not found" >&2; exit 2; }
checkpoint_size_flags "$CHECKPOINT"  # the checkpoint's arch and every size it records
EPOCHS=${EPOCHS:-3}
exec fairseq-train "$TASK_BIN" --user-dir "$REPO/truneg_fairseq" \
  --task sentence_prediction --criterion sentence_prediction "${SIZE_FLAGS[@]}" \
  --num-classes "$NUM_CLASSES" --init-token 0 --separator-token 2 --max-positions "$SIZE_POSITIONS" \
  --shorten-method truncate \
  --restore-file "$CHECKPOINT" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler \
  --batch-size 32 --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-6 --weight-decay 0.01 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "${WARMUP:-100}" --total-num-update "${TOTAL:-10000}" \
  --max-epoch "$EPOCHS" --clip-norm 1.0 ${FP16-$(mixed_precision_flag)} --no-epoch-checkpoints \
  --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric \
  --save-dir "${SAVE_DIR:-checkpoints/finetune}" --log-format simple --log-interval 50 "$@"
