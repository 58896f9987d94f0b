#!/usr/bin/env bash
# ELECTRA pre-training with fairseq-train (all visible GPUs through fairseq's DDP, fp16).
#
#   bash examples/electra/pretrain.sh small|base|CHECKPOINT|IMPORTED_DIR DATA_BIN CRITERION [extra fairseq-train flags]
#
# small        ELECTRA-small from scratch: 1M updates, batch 128, seq 128, lr 5e-4 (the paper's
#              ELECTRA-small; google-research/electra defaults)
# base         ELECTRA-base continued pre-training of a checkpoint of this plugin: 200k updates,
#              batch 128, seq 512, lr 5e-5; pass --restore-file electra_base.pt
# CHECKPOINT   an ELECTRA pre-training checkpoint of this plugin of any size (a .pt file): the
#              same schedule as base, restored from it, the arch and every size (positions,
#              LayerNorm epsilon) read from the checkpoint itself, so no size flag is needed
# IMPORTED_DIR a published pair imported with scripts/convert_hf.py import --generator (any
#              size: base, large, small): the same schedule as base, restored from its model.pt,
#              sizes and LayerNorm epsilon (1e-12) read from its import.json (--electra-sizes-from).
#              A discriminator imported alone (no --generator) gets a fresh generator (a quarter of
#              its width, a third for 768; seeded), first trained alone with the discriminator and
#              the shared embeddings frozen (--electra-freeze-discriminator, criterion electra):
#              HEAD_UPDATES (default 2000; 0 skips it) at HEAD_LR (default 1e-3) into HEAD_DIR
#              (default checkpoints/<import name>_generator_warmup), once; every criterion then
#              continues from that checkpoint. The continued criterion's own flags (--synonym-*)
#              stay out of the warm-up.
# CRITERION electra (baseline) | mlm_hard_correction (ELECTRA^HC) | mlm_soft_reg (ELECTRA^SR)
#           | mlm_sent_kl (ELECTRA_Sent^SR); each is given DATA_BIN/synonyms.npz
#           (scripts/build_synonym_table.py): the last three act on the generator's MLM term, and
#           the baseline's loss is ELECTRA's with or without it, the table only adding the
#           false-negative statistics to its log.
#
# GPUS (default: all visible) x MAX_SENTENCES x UPDATE_FREQ is the batch; the defaults give 128
# on one GPU. Multi-node: run under torchrun/SLURM as fairseq documents. NUM_WORKERS sets the
# data-loader workers (default 1: one core makes a 128 x 128 batch in ~2 ms, docs/benchmarks.md).
# WARMUP: warm-up updates of the learning rate (default 6% of MAX_UPDATE, at most 10000).
#
# PRECISION  auto (default: bf16 where torch.cuda.is_bf16_supported() without emulation, fp16
#            on other GPUs, fp32 without a GPU; examples/precision.sh) | bf16 (A100/H100/H200 and other GPUs from Ampere on: bf16 autocast, fp32
#            weights, no loss scaler) | fp16 (V100/T4: fairseq's --fp16 with the loss divided by
#            the masked tokens per batch, so ELECTRA's 50 x RTD sum does not overflow) | amp
#            (fairseq's --amp: fp16 autocast, fp32 weights, dynamic loss scale; its updates are
#            exact with the plugin's mend of fairseq 0.12, truneg_fairseq/compat/amp_unscale.py) |
#            fp32 (e.g. on a CPU with --cpu)
# The step uses static prediction slots and the fused AdamW optimizer (same losses and updates as
# the dynamic path and fairseq's adam); COMPILE=1 adds torch.compile of the encoder stacks,
# COMPILE=model of the whole forward and backward, COMPILE=update of the whole update (forward,
# backward, clipping, AdamW) as one graph, replayed as CUDA graphs on a GPU.
set -euo pipefail
USAGE="usage: pretrain.sh small|base|CHECKPOINT|IMPORTED_DIR DATA_BIN CRITERION [flags]"
SIZE=${1:?$USAGE}
DATA_BIN=${2:?$USAGE}
CRITERION=${3:?$USAGE}
shift 3
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
. "$REPO/examples/paths.sh"
check_data_path DATA_BIN "$DATA_BIN"
sharded_data "$DATA_BIN"  # DATA: DATA_BIN, or its shards
NAME=""
case "$SIZE" in
  small) ARCH=electra_small; SEQ=${SEQ:-128}; LR=${LR:-5e-4}; MAX_UPDATE=${MAX_UPDATE:-1000000}
         MAX_SENTENCES=${MAX_SENTENCES:-128}; UPDATE_FREQ=${UPDATE_FREQ:-1}; RESET=()
         MODEL=(--electra-max-positions 512) ;;
  base)  ARCH=electra_base; SEQ=${SEQ:-512}; LR=${LR:-5e-5}; MAX_UPDATE=${MAX_UPDATE:-200000}
         MAX_SENTENCES=${MAX_SENTENCES:-32}; UPDATE_FREQ=${UPDATE_FREQ:-4}
         RESET=(--reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler)
         MODEL=(--electra-max-positions 512) ;;
  *.pt) [ -f "$SIZE" ] || { echo "error: checkpoint $SIZE not found" >&2; exit 2; }
         checkpoint_size_flags "$SIZE"  # its arch and every size it records
         ARCH=${SIZE_FLAGS[1]}; MODEL=("${SIZE_FLAGS[@]:2}"); NAME=$(basename "$(dirname "$SIZE")")
         SEQ=${SEQ:-$(( SIZE_POSITIONS < 512 ? SIZE_POSITIONS : 512 ))}
         LR=${LR:-5e-5}; MAX_UPDATE=${MAX_UPDATE:-200000}
         MAX_SENTENCES=${MAX_SENTENCES:-32}; UPDATE_FREQ=${UPDATE_FREQ:-4}
         RESET=(--restore-file "$SIZE" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler) ;;
  *) if [ ! -f "$SIZE/model.pt" ] || [ ! -f "$SIZE/import.json" ]; then
       echo "error: the first argument is small, base or a directory written by scripts/convert_hf.py import" \
            "(model.pt + import.json); got '$SIZE'" >&2; exit 2
     fi
     IMPORTED=$(cd "$SIZE" && pwd)
     POSITIONS=$("${PYTHON:-python}" - "$IMPORTED/import.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
args = info.get("model_args")
if not isinstance(args, dict) or not isinstance(args.get("electra_max_positions"), int):
    sys.exit(f"error: {sys.argv[1]} records no ELECTRA sizes: import the published pair (with --generator) again")
print(args["electra_max_positions"], "fresh" if args.get("electra_discriminator_only") else "imported")
EOF
)
     read -r POSITIONS GENERATOR <<< "$POSITIONS"
     ARCH=electra_base; NAME=$(basename "$IMPORTED"); SEQ=${SEQ:-$(( POSITIONS < 512 ? POSITIONS : 512 ))}
     LR=${LR:-5e-5}; MAX_UPDATE=${MAX_UPDATE:-200000}
     MAX_SENTENCES=${MAX_SENTENCES:-32}; UPDATE_FREQ=${UPDATE_FREQ:-4}
     RESET=(--restore-file "$IMPORTED/model.pt" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler)
     MODEL=(--electra-sizes-from "$IMPORTED") ;;
esac
WARMUP=${WARMUP:-$(( MAX_UPDATE * 6 / 100 < 10000 ? MAX_UPDATE * 6 / 100 : 10000 ))}  # 6% of MAX_UPDATE, at most 10000
SAVE_DIR=${SAVE_DIR:-checkpoints/${NAME:-$ARCH}_${CRITERION}}
PRECISION=${PRECISION:-auto}
if [ "$PRECISION" = auto ]; then  # bf16 where the GPU has it natively, fp16 on other GPUs, fp32 on a CPU
  case "$(mixed_precision_flag)" in --bf16) PRECISION=bf16 ;; --fp16) PRECISION=fp16 ;; *) PRECISION=fp32 ;; esac
fi
case "$PRECISION" in
  bf16) PREC=(--electra-bf16-autocast) ;;
  fp16) PREC=(--fp16 --mlm-loss-divisor "$(( MAX_SENTENCES * SEQ * 15 / 100 ))") ;;
  amp)  PREC=(--amp) ;;
  fp32) PREC=() ;;
  *) echo "error: PRECISION must be auto, bf16, fp16, amp or fp32, got '$PRECISION'" >&2; exit 2 ;;
esac
FAST=(--mlm-prediction-slots static)
case "${COMPILE:-0}" in
  1) FAST+=(--electra-compile) ;;
  model) FAST+=(--electra-compile --electra-compile-scope model) ;;
  update) FAST+=(--electra-compile --electra-compile-scope update) ;;
  0) ;;
  *) echo "error: COMPILE must be 0, 1 (the encoder stacks), model (the whole forward) or update (the whole update, CUDA graphs on a GPU), got '$COMPILE'" >&2; exit 2 ;;
esac
TABLE=(--synonym-table "${SYNONYM_TABLE:-$DATA_BIN/synonyms.npz}")

if [ "${GENERATOR:-imported}" = fresh ] && [ "${HEAD_UPDATES:-2000}" -gt 0 ]; then
  HEAD_UPDATES=${HEAD_UPDATES:-2000}
  HEAD_DIR=${HEAD_DIR:-checkpoints/${NAME}_generator_warmup}
  source "$REPO/examples/warmup.sh"
  warmup_flags "--synonym-" "$@"  # the warm-up runs the electra criterion
  WHAT="$NAME has no generator: warming a fresh one up for $HEAD_UPDATES updates with the discriminator frozen"
  warm_up "$HEAD_DIR" "$HEAD_UPDATES" "$WHAT (criterion electra, lr ${HEAD_LR:-1e-3}) into $HEAD_DIR" \
    fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" \
      --task electra --arch "$ARCH" --criterion electra \
      --tokens-per-sample "$SEQ" --sample-break-mode none "${MODEL[@]}" \
      --optimizer fused_adamw --fused-adamw-betas '(0.9,0.999)' --fused-adamw-eps 1e-6 \
      --fused-adamw-weight-decay 0.01 --clip-norm 1.0 "${FAST[@]}" \
      --lr-scheduler polynomial_decay --batch-size "$MAX_SENTENCES" --update-freq "$UPDATE_FREQ" \
      "${PREC[@]}" --num-workers "${NUM_WORKERS:-1}" "${RESET[@]}" \
      --save-dir "$HEAD_DIR" --no-epoch-checkpoints --log-format simple --log-interval 100 \
      --tensorboard-logdir "$HEAD_DIR/tb" ${WARMUP_FLAGS[@]+"${WARMUP_FLAGS[@]}"} \
      --electra-freeze-discriminator --lr "${HEAD_LR:-1e-3}" --warmup-updates "$(( HEAD_UPDATES / 10 ))" \
      --total-num-update "$HEAD_UPDATES" --max-update "$HEAD_UPDATES" --save-interval-updates "$HEAD_UPDATES"
  RESET=(--restore-file "$WARM_CHECKPOINT" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler)
fi

exec fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" \
  --task electra --arch "$ARCH" --criterion "$CRITERION" "${TABLE[@]}" \
  --tokens-per-sample "$SEQ" --sample-break-mode none "${MODEL[@]}" \
  --optimizer fused_adamw --fused-adamw-betas '(0.9,0.999)' --fused-adamw-eps 1e-6 \
  --fused-adamw-weight-decay 0.01 --clip-norm 1.0 "${FAST[@]}" \
  --lr-scheduler polynomial_decay --lr "$LR" --warmup-updates "$WARMUP" --total-num-update "$MAX_UPDATE" \
  --max-update "$MAX_UPDATE" --batch-size "$MAX_SENTENCES" --update-freq "$UPDATE_FREQ" \
  "${PREC[@]}" --num-workers "${NUM_WORKERS:-1}" "${RESET[@]}" \
  --save-dir "$SAVE_DIR" --save-interval-updates 25000 --keep-interval-updates 4 --no-epoch-checkpoints \
  --log-format simple --log-interval 100 --tensorboard-logdir "$SAVE_DIR/tb" "$@"
