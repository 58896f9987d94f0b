#!/usr/bin/env bash
# CLINE: continue RoBERTa-base with MLM + replaced-token detection + the contrastive loss.
#
#   bash examples/cline/pretrain.sh CLINE_DATA_BIN CHECKPOINT|IMPORTED_DIR|none [extra fairseq-train flags]
#
# CLINE_DATA_BIN  output of scripts/make_cline_data.py (…/data-bin), binarized with the
#                 checkpoint's dict.txt (--dict) and tokenizer (GPT-2 BPE for roberta.base)
# CHECKPOINT      e.g. roberta.base/model.pt (fairseq's), or "none" to start from scratch
# IMPORTED_DIR    a directory written by scripts/convert_hf.py import (model.pt + import.json), of
#                 any size: its model.pt is restored and every size (positions and LayerNorm
#                 epsilon included) read from its import.json (--bert-sizes-from /
#                 --electra-sizes-from by ARCH), so a 6 x 384 BERT or an ELECTRA-small pair needs
#                 no size flag; TOKENS defaults to its positions (at most 512)
#
# Other backbones through ARCH: cline_bert_hf_base (a BERT imported with scripts/convert_hf.py),
# cline_electra_base / cline_electra_small (an ELECTRA pre-training checkpoint of the plugin, or
# the published generator + discriminator pair imported with scripts/convert_hf.py). WordPiece
# data for imported models: make_cline_data.py --tokenizer wordpiece --vocab VOCAB.txt.
#
# The paper's setting: 30k updates, 256 triples per update, seq 512, lr 1e-4, warm-up 500,
# Adam(0.9, 0.999, 1e-8), weight decay 0.01, fp16 (FP16= for fp32). Set UPDATE_FREQ so that
# GPUS x MAX_SENTENCES x UPDATE_FREQ = 256 (default: 1 GPU x 8 x 32). Every GPU visible to the
# process is used through fairseq's own DDP.
set -euo pipefail
USAGE="usage: pretrain.sh CLINE_DATA_BIN CHECKPOINT|IMPORTED_DIR|none [fairseq-train flags]"
DATA_BIN=${1:?$USAGE}
RESTORE=${2:?$USAGE}
shift 2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
. "$REPO/examples/paths.sh"
check_data_path CLINE_DATA_BIN "$DATA_BIN"
ARCH=${ARCH:-cline_roberta_base}
MAX_UPDATE=${MAX_UPDATE:-30000}
LR=${LR:-1e-4}
WARMUP=${WARMUP:-500}
MAX_SENTENCES=${MAX_SENTENCES:-8}
UPDATE_FREQ=${UPDATE_FREQ:-32}
NUM_WORKERS=${NUM_WORKERS:-2}
SAVE_DIR=${SAVE_DIR:-checkpoints/cline}
RESTORE_FLAGS=()
# the model's own flags: RoBERTa/BERT share fairseq's names, ELECTRA's are --electra-*
POSITIONS=512
MODEL_FLAGS=(--dropout 0.1 --attention-dropout 0.1)
SIZES_FLAG=--bert-sizes-from
case "$ARCH" in
  cline_electra_*) MODEL_FLAGS=(--electra-dropout 0.1 --electra-attention-dropout 0.1); SIZES_FLAG=--electra-sizes-from ;;
  cline_roberta_*) SIZES_FLAG="" ;;
esac
if [ -d "$RESTORE" ]; then  # an import directory: its model.pt, its sizes from its import.json
  if [ ! -f "$RESTORE/model.pt" ] || [ ! -f "$RESTORE/import.json" ]; then
    echo "error: $RESTORE has no model.pt and import.json: give a directory written by scripts/convert_hf.py import," \
         "a checkpoint file or none" >&2; exit 2
  fi
  if [ -z "$SIZES_FLAG" ]; then
    echo "error: $RESTORE is an import of a published model: set ARCH=cline_bert_hf_base or cline_electra_base" \
         "(ARCH=$ARCH is fairseq's RoBERTa)" >&2; exit 2
  fi
  IMPORTED=$(cd "$RESTORE" && pwd)
  POSITIONS=$(import_positions "$IMPORTED/import.json")
  MODEL_FLAGS+=("$SIZES_FLAG" "$IMPORTED")
  RESTORE="$IMPORTED/model.pt"
else
  case "$ARCH" in
    cline_electra_*) MODEL_FLAGS+=(--electra-max-positions 512) ;;
    *) MODEL_FLAGS+=(--max-positions 512) ;;
  esac
fi
TOKENS=${TOKENS:-$(( POSITIONS < 512 ? POSITIONS : 512 ))}
if [ "$RESTORE" != none ]; then
  RESTORE_FLAGS=(--restore-file "$RESTORE" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler)
fi

exec fairseq-train "$DATA_BIN" --user-dir "$REPO/truneg_fairseq" \
  --task cline --criterion cline --arch "$ARCH" --tokens-per-sample "$TOKENS" "${MODEL_FLAGS[@]}" \
  "${RESTORE_FLAGS[@]}" \
  --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-8 --weight-decay 0.01 --clip-norm 0.0 \
  --lr-scheduler polynomial_decay --lr "$LR" --warmup-updates "$WARMUP" --total-num-update "$MAX_UPDATE" \
  --max-update "$MAX_UPDATE" --batch-size "$MAX_SENTENCES" --update-freq "$UPDATE_FREQ" \
  --num-workers "$NUM_WORKERS" ${FP16-$(mixed_precision_flag)} --ddp-backend pytorch_ddp \
  --save-dir "$SAVE_DIR" --save-interval-updates 5000 --keep-interval-updates 3 --no-epoch-checkpoints \
  --log-format simple --log-interval 100 --tensorboard-logdir "$SAVE_DIR/tb" "$@"
