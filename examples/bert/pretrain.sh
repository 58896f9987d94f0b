#!/usr/bin/env bash
# Continued pre-training of a published BERT of any size imported with scripts/convert_hf.py
# (fairseq-train, all visible GPUs through fairseq's DDP, fp16).
#
#   bash examples/bert/pretrain.sh IMPORTED_DIR DATA_BIN CRITERION [extra fairseq-train flags]
#
# IMPORTED_DIR the directory `convert_hf.py import` wrote (model.pt, dict.txt, vocab.txt,
#              import.json): the model's sizes are read from its import.json (--arch bert_hf
#              --bert-sizes-from IMPORTED_DIR), so a 6 x 384 or a 24 x 1024 model needs no size flags
# DATA_BIN     the corpus binarized with IMPORTED_DIR/dict.txt (see README.md)
# CRITERION    mlm_plain (baseline: fairseq's masked_lm loss, with the false-negative statistics)
#              | mlm_hard_correction (BERT^HC) | mlm_soft_reg (BERT^SR) | mlm_sent_kl; each needs
#              DATA_BIN/synonyms.npz (scripts/build_synonym_table.py). fairseq's own masked_lm is
#              taken too (no table, no statistics, not compiled)
#
# Two stages:
# 1. head warm-up (models published without a masked-LM head, e.g. sentence-embedding BERTs; the
#    import starts their head from a seeded initialisation): plain masked_lm with the encoder
#    frozen (--bert-freeze-encoder), HEAD_UPDATES updates (default 2000 for a fresh head, 0 for an
#    imported one) at HEAD_LR (default 1e-3), saved in HEAD_DIR (default
#    checkpoints/<import name>_head_warmup). It runs once: every criterion continues from the
#    same warmed-up checkpoint (checkpoint_1_<HEAD_UPDATES>.pt), so the baseline and HC/SR start
#    from the same model; an unfinished warm-up is run again. The extra flags reach both stages,
#    except the continued criterion's own (--synonym-*, --mlm-*), which the warm-up (masked_lm)
#    does not take.
# 2. CRITERION from the warmed-up head (or the import itself when there is no warm-up).
#
# The paper's setting: 200k updates, batch 128, seq 512, lr 5e-5. GPUS x MAX_SENTENCES x
# UPDATE_FREQ is the batch; the defaults give 128 on one GPU. FP16= (empty) trains in fp32;
# NUM_WORKERS sets the data-loader workers (default 1: --task batch_masked_lm, fairseq's masked_lm
# with each batch masked at once, makes a batch in ~1-3 ms on one core, docs/benchmarks.md);
# SAVE_DIR, LR, MAX_UPDATE, WARMUP, SEQ override.
# Long lines: blocks are whole sentences (BREAK_MODE=complete) of at most SEQ tokens (default:
# the model's positions, at most 512); a sentence longer than SEQ is skipped in training and
# validation, and fairseq logs how many ("N samples have invalid sizes and will be skipped").
# BREAK_MODE=none cuts the text into SEQ-token blocks instead, so nothing is skipped.
# COMPILE=model compiles the model's forward with its backward in stage 2 (--batch-mlm-compile
# --batch-mlm-compile-scope model), COMPILE=update the whole update (forward, backward, clipping,
# AdamW) as one graph, replayed as CUDA graphs on a GPU; both pad every batch to SEQ columns and
# drop the short last batch of an epoch (counted in the log). For the plugin's criterions (mlm_plain
# for the baseline, not masked_lm; the head warm-up stays eager). The compiled update is one graph with UPDATE_FREQ=1; with
# UPDATE_FREQ above 1 it is two graphs: a batch's forward and backward, then the optimizer step.
set -euo pipefail
USAGE="usage: pretrain.sh IMPORTED_DIR DATA_BIN CRITERION [flags]"
IMPORTED=${1:?$USAGE}
DATA_BIN=${2:?$USAGE}
CRITERION=${3:?$USAGE}
shift 3
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
PYTHON=${PYTHON:-python}
. "$REPO/examples/paths.sh"
check_data_path DATA_BIN "$DATA_BIN"
sharded_data "$DATA_BIN"  # DATA: DATA_BIN, or its shards
case "$IMPORTED" in
  base|large) echo "error: pretrain.sh takes the import directory first (its sizes come from its import.json):" \
                   "bash examples/bert/pretrain.sh IMPORTED_DIR DATA_BIN CRITERION" >&2; exit 2 ;;
esac
if [ ! -f "$IMPORTED/model.pt" ] || [ ! -f "$IMPORTED/import.json" ]; then
  echo "error: $IMPORTED/model.pt or import.json not found: run scripts/convert_hf.py import HF_DIR $IMPORTED first" >&2
  exit 2
fi
IMPORTED=$(cd "$IMPORTED" && pwd)
# what the import recorded: the position table's size and whether the MLM head was published
read -r POSITIONS HEAD < <("$PYTHON" - "$IMPORTED/import.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
args = info.get("model_args")
if not isinstance(args, dict) or not isinstance(args.get("max_positions"), int):
    sys.exit(f"error: {sys.argv[1]} records no model sizes: import the model again with scripts/convert_hf.py import")
print(args["max_positions"], "fresh" if str(info.get("mlm_head", "")).startswith("fresh") else "imported")
EOF
)
SEQ=${SEQ:-$(( POSITIONS < 512 ? POSITIONS : 512 ))}
MAX_UPDATE=${MAX_UPDATE:-200000}
WARMUP=${WARMUP:-$(( MAX_UPDATE * 6 / 100 < 10000 ? MAX_UPDATE * 6 / 100 : 10000 ))}  # 6% of MAX_UPDATE, at most 10000
NAME=$(basename "$IMPORTED")
SAVE_DIR=${SAVE_DIR:-checkpoints/${NAME}_${CRITERION}}
if [ "$HEAD" = fresh ]; then HEAD_UPDATES=${HEAD_UPDATES:-2000}; else HEAD_UPDATES=${HEAD_UPDATES:-0}; fi
HEAD_DIR=${HEAD_DIR:-checkpoints/${NAME}_head_warmup}
TABLE=()
if [ "$CRITERION" != masked_lm ]; then
  TABLE=(--synonym-table "${SYNONYM_TABLE:-$DATA_BIN/synonyms.npz}" --mlm-prediction-slots static)
fi
. "$REPO/examples/compile.sh"  # mlm_compile_flags: the flags for COMPILE
mlm_compile_flags "$CRITERION" || exit 2
MODEL=(--task batch_masked_lm --arch bert_hf --bert-sizes-from "$IMPORTED"
  --tokens-per-sample "$SEQ" --sample-break-mode "${BREAK_MODE:-complete}" --skip-invalid-size-inputs-valid-test
  --optimizer fused_adamw --fused-adamw-betas '(0.9,0.999)' --fused-adamw-eps 1e-6 --fused-adamw-weight-decay 0.01 --clip-norm 1.0
  --lr-scheduler polynomial_decay --batch-size "${MAX_SENTENCES:-16}" --update-freq "${UPDATE_FREQ:-8}"
  ${FP16-$(mixed_precision_flag)} --num-workers "${NUM_WORKERS:-1}" --no-epoch-checkpoints --log-format simple --log-interval 100)
RESET=(--reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler)
START="$IMPORTED/model.pt"

if [ "$HEAD_UPDATES" -gt 0 ]; then
  source "$REPO/examples/warmup.sh"
  warmup_flags "--synonym- --mlm-" "$@"  # the warm-up runs masked_lm
  WHAT="$NAME's masked-LM head is $HEAD: warming it up for $HEAD_UPDATES updates with the encoder frozen"
  warm_up "$HEAD_DIR" "$HEAD_UPDATES" "$WHAT (masked_lm, lr ${HEAD_LR:-1e-3}) into $HEAD_DIR" \
    fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" "${MODEL[@]}" --criterion masked_lm \
      --restore-file "$START" "${RESET[@]}" --save-dir "$HEAD_DIR" --tensorboard-logdir "$HEAD_DIR/tb" \
      ${WARMUP_FLAGS[@]+"${WARMUP_FLAGS[@]}"} \
      --bert-freeze-encoder --lr "${HEAD_LR:-1e-3}" --warmup-updates "$(( HEAD_UPDATES / 10 ))" \
      --total-num-update "$HEAD_UPDATES" --max-update "$HEAD_UPDATES" --save-interval-updates "$HEAD_UPDATES"
  START="$WARM_CHECKPOINT"
fi

exec fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" "${MODEL[@]}" --criterion "$CRITERION" "${TABLE[@]}" \
  "${COMPILE_FLAGS[@]}" \
  --restore-file "$START" "${RESET[@]}" \
  --lr "${LR:-5e-5}" --warmup-updates "$WARMUP" --total-num-update "$MAX_UPDATE" --max-update "$MAX_UPDATE" \
  --save-dir "$SAVE_DIR" --save-interval-updates 25000 --keep-interval-updates 4 \
  --tensorboard-logdir "$SAVE_DIR/tb" "$@"
