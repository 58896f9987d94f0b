#!/usr/bin/env bash
# Continued pre-training of a published BERT imported with scripts/convert_hf.py (fairseq-train,
# all visible GPUs through fairseq's DDP, fp16).
#
#   bash examples/bert/pretrain.sh base|large IMPORTED_DIR DATA_BIN CRITERION [extra fairseq-train flags]
#
# base|large   bert-base-* (12 x 768) or bert-large-* (24 x 1024): --arch bert_hf_base|bert_hf_large
# IMPORTED_DIR the directory `convert_hf.py import` wrote (model.pt, dict.txt, vocab.txt)
# DATA_BIN     the corpus binarized with IMPORTED_DIR/dict.txt (see README.md)
# CRITERION    masked_lm (baseline) | mlm_hard_correction (BERT^HC) | mlm_soft_reg (BERT^SR);
#              the last two need DATA_BIN/synonyms.npz (scripts/build_synonym_table.py)
#
# The paper's setting: 200k updates, batch 128, seq 512, lr 5e-5. GPUS x MAX_SENTENCES x
# UPDATE_FREQ is the batch; the defaults give 128 on one GPU. FP16= (empty) trains in fp32;
# NUM_WORKERS sets the data-loader workers; SAVE_DIR, LR, MAX_UPDATE, WARMUP override.
set -euo pipefail
USAGE="usage: pretrain.sh base|large IMPORTED_DIR DATA_BIN CRITERION [flags]"
SIZE=${1:?$USAGE}
IMPORTED=${2:?$USAGE}
DATA_BIN=${3:?$USAGE}
CRITERION=${4:?$USAGE}
shift 4
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "$SIZE" in
  base|large) ARCH=bert_hf_$SIZE ;;
  *) echo "error: size must be base or large, got '$SIZE'" >&2; exit 2 ;;
esac
if [ ! -f "$IMPORTED/model.pt" ]; then
  echo "error: $IMPORTED/model.pt not found: run scripts/convert_hf.py import HF_DIR $IMPORTED first" >&2; exit 2
fi
IMPORTED=$(cd "$IMPORTED" && pwd)
MAX_UPDATE=${MAX_UPDATE:-200000}
SAVE_DIR=${SAVE_DIR:-checkpoints/${ARCH}_${CRITERION}}
TABLE=()
if [ "$CRITERION" != masked_lm ]; then TABLE=(--synonym-table "${SYNONYM_TABLE:-synonyms.npz}"); fi

exec fairseq-train "$DATA_BIN" --user-dir "$REPO/truneg_fairseq" \
  --task masked_lm --arch "$ARCH" --criterion "$CRITERION" "${TABLE[@]}" \
  --restore-file "$IMPORTED/model.pt" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler \
  --tokens-per-sample "${SEQ:-512}" --sample-break-mode complete \
  --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0 \
  --lr-scheduler polynomial_decay --lr "${LR:-5e-5}" --warmup-updates "${WARMUP:-10000}" \
  --total-num-update "$MAX_UPDATE" --max-update "$MAX_UPDATE" \
  --batch-size "${MAX_SENTENCES:-16}" --update-freq "${UPDATE_FREQ:-8}" \
  ${FP16---fp16} --num-workers "${NUM_WORKERS:-2}" \
  --save-dir "$SAVE_DIR" --save-interval-updates 25000 --keep-interval-updates 4 --no-epoch-checkpoints \
  --log-format simple --log-interval 100 --tensorboard-logdir "$SAVE_DIR/tb" "$@"
