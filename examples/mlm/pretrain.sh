#!/usr/bin/env bash
# Counter-false-negative masked-LM pre-training of RoBERTa with fairseq-train.
#
#   bash examples/mlm/pretrain.sh DATA_BIN CRITERION [extra fairseq-train flags]
#
# DATA_BIN   fairseq-preprocess --only-source output with a synonym table built for its dict.txt
#            (scripts/prepare_corpus.py + scripts/build_synonym_table.py --output DATA_BIN/synonyms.npz)
# CRITERION  mlm_plain (baseline: fairseq's masked_lm loss, with the false-negative statistics) |
#            mlm_hard_correction | mlm_soft_reg | mlm_sent_kl; each takes DATA_BIN/synonyms.npz.
#            fairseq's own masked_lm is taken too (no table, no statistics, not compiled)
#
# Defaults follow RoBERTa-base continued pre-training in the paper (seq 512, lr 5e-5 when
# continuing from pre-trained weights: RESTORE=model.pt, which restores it with the optimizer,
# data loader, meters and schedule reset and builds the model with the sizes the checkpoint
# records: --arch, layers, widths, heads and positions, so a RoBERTa of any size continues with
# no size flag). SEQ (default: the model's positions, at most 512) is the block length; a
# sentence longer than SEQ is skipped in training and validation (logged by fairseq).
# WARMUP (default: 6% of MAX_UPDATE, at most 10000) is the learning rate's warm-up in updates.
# ARCH (default truneg_roberta_base, without RESTORE) is fairseq's RoBERTa with
# the forward every criterion needs; its weights and checkpoint keys are roberta_base's, so
# fairseq's roberta.base/model.pt continues here and the result fine-tunes as roberta_base. Every
# GPU visible to the process is used through fairseq's own DDP (its default backend); set
# UPDATE_FREQ so that GPUS x MAX_SENTENCES x UPDATE_FREQ = the batch you want. The task is
# batch_masked_lm: fairseq's masked_lm (same flags, blocks and 80/10/10 masking) with each batch
# masked at once in the loader, ~1-3 ms a batch on one core against fairseq's ~30-100 ms
# (docs/benchmarks.md), so NUM_WORKERS=1 (default) keeps ahead of a GPU step.
# COMPILE=model compiles the model's forward with its backward (--batch-mlm-compile
# --batch-mlm-compile-scope model), COMPILE=update the whole update (forward, backward, clipping,
# AdamW) as one graph, replayed as CUDA graphs on a GPU; both pad every batch to SEQ columns and
# drop the short last batch of an epoch (counted in the log). For the plugin's criterions on
# truneg_* archs (mlm_plain for the baseline, not masked_lm). The compiled update is one graph with UPDATE_FREQ=1; with
# UPDATE_FREQ above 1 it is two graphs: a batch's forward and backward, then the optimizer step.
set -euo pipefail
DATA_BIN=${1:?usage: pretrain.sh DATA_BIN CRITERION [fairseq-train flags]}
CRITERION=${2:?usage: pretrain.sh DATA_BIN CRITERION [fairseq-train flags]}
shift 2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
. "$REPO/examples/paths.sh"
check_data_path DATA_BIN "$DATA_BIN"
sharded_data "$DATA_BIN"  # DATA: DATA_BIN, or its shards
ARCH=${ARCH:-truneg_roberta_base}
MODEL=(--arch "$ARCH")
POSITIONS=512
if [ -n "${RESTORE:-}" ]; then
  [ -f "$RESTORE" ] || { echo "error: RESTORE=$RESTORE: no such checkpoint file" >&2; exit 2; }
  checkpoint_size_flags "$RESTORE"  # the checkpoint's arch and sizes
  MODEL=("${SIZE_FLAGS[@]}" --restore-file "$RESTORE" --reset-optimizer --reset-dataloader --reset-meters
         --reset-lr-scheduler)
  ARCH=${SIZE_FLAGS[1]}; POSITIONS=$SIZE_POSITIONS
fi
SEQ=${SEQ:-$(( POSITIONS < 512 ? POSITIONS : 512 ))}
MAX_UPDATE=${MAX_UPDATE:-200000}
WARMUP=${WARMUP:-$(( MAX_UPDATE * 6 / 100 < 10000 ? MAX_UPDATE * 6 / 100 : 10000 ))}  # 6% of MAX_UPDATE, at most 10000
LR=${LR:-5e-5}
MAX_SENTENCES=${MAX_SENTENCES:-16}
UPDATE_FREQ=${UPDATE_FREQ:-8}
SAVE_DIR=${SAVE_DIR:-checkpoints/${ARCH}_${CRITERION}}
TABLE_FLAGS=()
if [ "$CRITERION" != masked_lm ]; then
  TABLE_FLAGS=(--synonym-table "${SYNONYM_TABLE:-synonyms.npz}")
  # the plugin's forward (truneg_*): a fixed number of prediction slots per batch, sized without
  # asking the device; fairseq's roberta_* take boolean masks (dynamic slots)
  case "$ARCH" in truneg_*) TABLE_FLAGS+=(--mlm-prediction-slots static) ;; esac
fi
. "$REPO/examples/compile.sh"  # mlm_compile_flags: the flags for COMPILE
mlm_compile_flags "$CRITERION" || exit 2

exec fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" \
  --task batch_masked_lm --num-workers "${NUM_WORKERS:-1}" --criterion "$CRITERION" "${TABLE_FLAGS[@]}" "${COMPILE_FLAGS[@]}" \
  "${MODEL[@]}" --sample-break-mode complete --tokens-per-sample "$SEQ" --skip-invalid-size-inputs-valid-test \
  --optimizer fused_adamw --fused-adamw-betas '(0.9,0.98)' --fused-adamw-eps 1e-6 --clip-norm 0.0 --fused-adamw-weight-decay 0.01 \
  --lr-scheduler polynomial_decay --lr "$LR" --warmup-updates "$WARMUP" --total-num-update "$MAX_UPDATE" \
  --max-update "$MAX_UPDATE" --batch-size "$MAX_SENTENCES" --update-freq "$UPDATE_FREQ" \
  --dropout 0.1 --attention-dropout 0.1 ${FP16-$(mixed_precision_flag)} \
  --save-dir "$SAVE_DIR" --save-interval-updates 10000 --keep-interval-updates 5 \
  --log-format simple --log-interval 100 --tensorboard-logdir "$SAVE_DIR/tb" "$@"
