#!/usr/bin/env bash
# Fine-tune a pre-trained checkpoint on SQuAD v1.1 and write dev predictions.
#
#   bash examples/squad/finetune.sh small|base|roberta_base SQUAD_DIR SPM_MODEL CHECKPOINT [fairseq-train flags]
#
# SQUAD_DIR holds dict.txt (the pre-training dictionary), train.json (train-v1.1.json) and
# valid.json (dev-v1.1.json). ELECTRA paper settings: 2 epochs, batch 32, lr 3e-4 (small) /
# 1e-4 (base), 10% warmup; windows of 384 tokens, stride 128, query 64; n-best 20, answers up to
# 30 tokens. EM/F1 are validation metrics (the best checkpoint is chosen by F1).
# SAVE_DIR (default checkpoints/squad), FP16= (empty) for fp32, UPDATES (default: 2 epochs of
# 88k windows / 32).
set -euo pipefail
SIZE=${1:?usage: finetune.sh small|base|roberta_base SQUAD_DIR SPM_MODEL CHECKPOINT [flags]}
DATA=${2:?}; SPM=${3:?}; CKPT=${4:?}
shift 4
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
case "$SIZE" in
  small) ARCH=electra_small; LR=${LR:-3e-4} ;;
  base) ARCH=electra_base; LR=${LR:-1e-4} ;;
  roberta_base) ARCH=roberta_base; LR=${LR:-1.5e-5} ;;
  *) echo "error: size must be small, base or roberta_base" >&2; exit 2 ;;
esac
UPDATES=${UPDATES:-5500}
SAVE_DIR=${SAVE_DIR:-checkpoints/squad}
fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" --task squad --criterion squad --arch "$ARCH" \
  --squad-spm-model "$SPM" --squad-max-len 384 --squad-doc-stride 128 --squad-max-query 64 \
  --restore-file "$CKPT" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler \
  --batch-size 32 --required-batch-size-multiple 1 --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-6 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates $((UPDATES / 10)) --total-num-update "$UPDATES" \
  --max-update "$UPDATES" --clip-norm 1.0 ${FP16-$(mixed_precision_flag)} --num-workers 0 \
  --best-checkpoint-metric f1 --maximize-best-checkpoint-metric --no-epoch-checkpoints \
  --save-dir "$SAVE_DIR" --log-format simple --log-interval 50 "$@"
python "$REPO/scripts/squad_predict.py" --data "$DATA" --checkpoint "$SAVE_DIR/checkpoint_best.pt" \
  --output "$SAVE_DIR/predictions.json"
python "$REPO/scripts/squad_eval.py" "$DATA/valid.json" "$SAVE_DIR/predictions.json"
