#!/usr/bin/env bash
# ELECTRA pre-training with fairseq-train (all visible GPUs through fairseq's DDP, fp16).
#
#   bash examples/electra/pretrain.sh small|base DATA_BIN CRITERION [extra fairseq-train flags]
#
# small     ELECTRA-small from scratch: 1M updates, batch 128, seq 128, lr 5e-4 (the paper's
#           ELECTRA-small; google-research/electra defaults)
# base      ELECTRA-base continued pre-training: 200k updates, batch 128, seq 512, lr 5e-5;
#           pass --restore-file electra_base.pt (a checkpoint of this plugin)
# CRITERION electra (baseline) | mlm_hard_correction (ELECTRA^HC) | mlm_soft_reg (ELECTRA^SR)
#           | mlm_sent_kl (ELECTRA_Sent^SR); the last three need DATA_BIN/synonyms.npz
#           (scripts/build_synonym_table.py) and act on the generator's MLM term.
#
# GPUS (default: all visible) x MAX_SENTENCES x UPDATE_FREQ is the batch; the defaults give 128
# on one GPU. Multi-node: run under torchrun/SLURM as fairseq documents. NUM_WORKERS sets the
# data-loader workers.
#
# PRECISION  bf16 (default; A100/H100/H200 and other GPUs from Ampere on: bf16 autocast, fp32
#            weights, no loss scaler) | fp16 (V100/T4: fairseq's --fp16 with the loss divided by
#            the masked tokens per batch, so ELECTRA's 50 x RTD sum does not overflow) | amp |
#            fp32 (e.g. on a CPU with --cpu)
# The step uses static prediction slots and the fused AdamW optimizer (same losses and updates as
# the dynamic path and fairseq's adam); COMPILE=1 adds torch.compile of the encoder stacks.
set -euo pipefail
SIZE=${1:?usage: pretrain.sh small|base DATA_BIN CRITERION [flags]}
DATA_BIN=${2:?usage: pretrain.sh small|base DATA_BIN CRITERION [flags]}
CRITERION=${3:?usage: pretrain.sh small|base DATA_BIN CRITERION [flags]}
shift 3
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "$SIZE" in
  small) ARCH=electra_small; SEQ=128; LR=${LR:-5e-4}; MAX_UPDATE=${MAX_UPDATE:-1000000}
         MAX_SENTENCES=${MAX_SENTENCES:-128}; UPDATE_FREQ=${UPDATE_FREQ:-1}; RESET=() ;;
  base)  ARCH=electra_base; SEQ=512; LR=${LR:-5e-5}; MAX_UPDATE=${MAX_UPDATE:-200000}
         MAX_SENTENCES=${MAX_SENTENCES:-32}; UPDATE_FREQ=${UPDATE_FREQ:-4}
         RESET=(--reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler) ;;
  *) echo "error: size must be small or base, got '$SIZE'" >&2; exit 2 ;;
esac
SAVE_DIR=${SAVE_DIR:-checkpoints/${ARCH}_${CRITERION}}
case "${PRECISION:-bf16}" in
  bf16) PREC=(--electra-bf16-autocast) ;;
  fp16) PREC=(--fp16 --mlm-loss-divisor "$(( MAX_SENTENCES * SEQ * 15 / 100 ))") ;;
  amp)  PREC=(--amp) ;;
  fp32) PREC=() ;;
  *) echo "error: PRECISION must be bf16, fp16, amp or fp32, got '$PRECISION'" >&2; exit 2 ;;
esac
FAST=(--mlm-prediction-slots static)
if [ "${COMPILE:-0}" = 1 ]; then FAST+=(--electra-compile); fi
TABLE=()
if [ "$CRITERION" != electra ]; then TABLE=(--synonym-table "${SYNONYM_TABLE:-synonyms.npz}"); fi

exec fairseq-train "$DATA_BIN" --user-dir "$REPO/truneg_fairseq" \
  --task electra --arch "$ARCH" --criterion "$CRITERION" "${TABLE[@]}" \
  --tokens-per-sample "$SEQ" --sample-break-mode none --electra-max-positions 512 \
  --optimizer fused_adamw --fused-adamw-betas '(0.9,0.999)' --fused-adamw-eps 1e-6 \
  --fused-adamw-weight-decay 0.01 --clip-norm 1.0 "${FAST[@]}" \
  --lr-scheduler polynomial_decay --lr "$LR" --warmup-updates 10000 --total-num-update "$MAX_UPDATE" \
  --max-update "$MAX_UPDATE" --batch-size "$MAX_SENTENCES" --update-freq "$UPDATE_FREQ" \
  "${PREC[@]}" --num-workers "${NUM_WORKERS:-2}" "${RESET[@]}" \
  --save-dir "$SAVE_DIR" --save-interval-updates 25000 --keep-interval-updates 4 --no-epoch-checkpoints \
  --log-format simple --log-interval 100 --tensorboard-logdir "$SAVE_DIR/tb" "$@"
