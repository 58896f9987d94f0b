#!/usr/bin/env bash
# Fine-tune a pre-trained checkpoint on SQuAD v1.1 and write dev predictions.
#
#   bash examples/squad/finetune.sh small|base|roberta_base SQUAD_DIR TOKENIZER CHECKPOINT [fairseq-train flags]
#
# small/base/roberta_base  the learning rate (3e-4 / 1e-4 / 1.5e-5; LR overrides it)
# SQUAD_DIR   holds dict.txt (the pre-training dictionary), train.json (train-v1.1.json) and
#             valid.json (dev-v1.1.json)
# TOKENIZER   the pre-training tokenizer: a sentencepiece .model, a WordPiece vocab.txt or
#             tokenizer.json (a BERT or ELECTRA imported with scripts/convert_hf.py: its
#             IMPORTED_DIR/vocab.txt), or a directory with GPT-2's encoder.json and vocab.bpe
# CHECKPOINT  any checkpoint of the plugin (ELECTRA pre-training, RoBERTa, an imported or
#             continued BERT/ELECTRA): the arch and every size (positions included) are read from
#             it, so a model of any size needs no size flag
# ELECTRA paper settings: 2 epochs, batch 32, 10% warmup; windows of 384 tokens (at most the
# model's positions; MAX_LEN overrides), stride 128, query 64; n-best 20, answers up to 30
# tokens. EM/F1 are validation metrics (the best checkpoint is chosen by F1).
# The run makes exactly UPDATES updates (default: 2 epochs of SQuAD v1.1's ~88k windows in
# batches of BSZ x --update-freq), and the learning rate's schedule is those updates: WARMUP
# updates of warm-up (default 10%), then a linear decay to 0 at the last one. Flags that would
# end the run elsewhere or change the schedule (--max-update, --max-epoch, --total-num-update,
# --warmup-updates, --lr-scheduler) are refused: set UPDATES and WARMUP.
# SAVE_DIR (default checkpoints/squad), FP16= (empty) for fp32, BSZ (32).
set -euo pipefail
USAGE="usage: finetune.sh small|base|roberta_base SQUAD_DIR TOKENIZER CHECKPOINT [flags]"
SIZE=${1:?$USAGE}; DATA=${2:?$USAGE}; TOKENIZER=${3:?$USAGE}; CKPT=${4:?$USAGE}
shift 4
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/venv.sh"  # fairseq-train from REPO/.venv when no environment is active
. "$REPO/examples/precision.sh"  # mixed_precision_flag: --bf16 or --fp16 for this GPU, nothing on a CPU
. "$REPO/examples/paths.sh"
case "$SIZE" in
  small) LR=${LR:-3e-4} ;;
  base) LR=${LR:-1e-4} ;;
  roberta_base) LR=${LR:-1.5e-5} ;;
  *) echo "error: size must be small, base or roberta_base (it picks the learning rate)" >&2; exit 2 ;;
esac
[ -f "$CKPT" ] || { echo "error: checkpoint $CKPT not found" >&2; exit 2; }
for f in dict.txt train.json valid.json; do
  [ -f "$DATA/$f" ] || { echo "error: SQUAD_DIR $DATA has no $f (see examples/squad/README.md)" >&2; exit 2; }
done
if [ -d "$TOKENIZER" ]; then
  [ -f "$TOKENIZER/encoder.json" ] && [ -f "$TOKENIZER/vocab.bpe" ] || {
    echo "error: TOKENIZER $TOKENIZER is a directory without GPT-2's encoder.json and vocab.bpe" >&2; exit 2; }
  TOK=(--squad-tokenizer gpt2 --squad-gpt2-encoder-json "$TOKENIZER/encoder.json" --squad-gpt2-vocab-bpe "$TOKENIZER/vocab.bpe")
else
  [ -f "$TOKENIZER" ] || { echo "error: TOKENIZER $TOKENIZER not found" >&2; exit 2; }
  case "$TOKENIZER" in
    *.model) TOK=(--squad-tokenizer sentencepiece --squad-spm-model "$TOKENIZER") ;;
    *.txt|*.json) TOK=(--squad-tokenizer wordpiece --squad-vocab "$TOKENIZER") ;;
    *) echo "error: TOKENIZER $TOKENIZER: give a sentencepiece .model, a WordPiece vocab.txt or tokenizer.json," \
            "or a GPT-2 BPE directory" >&2; exit 2 ;;
  esac
fi
# the run's length and schedule are UPDATES and WARMUP; --update-freq N (N batches per update)
# divides the default UPDATES
FREQ=1
NEXT=
for a in "$@"; do
  if [ "$NEXT" = freq ]; then FREQ=$a; NEXT=; continue; fi
  case "$a" in
    --update-freq) NEXT=freq ;;
    --update-freq=*) FREQ=${a#--update-freq=} ;;
    --max-update|--max-update=*|--max-epoch|--max-epoch=*|--total-num-update|--total-num-update=*|\
    --warmup-updates|--warmup-updates=*|--lr-scheduler|--lr-scheduler=*)
      echo "error: ${a%%=*}: the run makes UPDATES updates with WARMUP of warm-up and a decay to 0 at" \
           "the last; set UPDATES=N and WARMUP=N instead" >&2; exit 2 ;;
  esac
done
BSZ=${BSZ:-32}
case "$FREQ" in
  ''|*[!0-9]*|0) echo "error: --update-freq $FREQ: give one whole number above 0" >&2; exit 2 ;;
esac
for v in BSZ ${UPDATES:+UPDATES} ${WARMUP:+WARMUP}; do
  case "${!v}" in
    ''|*[!0-9]*) echo "error: $v=${!v}: give a whole number" >&2; exit 2 ;;
  esac
done
[ "$BSZ" -gt 0 ] || { echo "error: BSZ=$BSZ: give at least one window per batch" >&2; exit 2; }
UPDATES=${UPDATES:-$(( (2 * 88000 + BSZ * FREQ - 1) / (BSZ * FREQ) ))}  # 2 epochs of ~88k windows
WARMUP=${WARMUP:-$(( UPDATES / 10 ))}
[ "$UPDATES" -gt 0 ] || { echo "error: UPDATES=$UPDATES: give at least one update" >&2; exit 2; }
if [ "$WARMUP" -ge "$UPDATES" ] && [ "$WARMUP" -gt 0 ]; then
  echo "error: WARMUP=$WARMUP: the warm-up must end before the run's last update; give WARMUP" \
       "between 0 and $(( UPDATES - 1 )) (UPDATES=$UPDATES)" >&2; exit 2
fi
checkpoint_size_flags "$CKPT"  # the checkpoint's arch and every size it records
MAX_LEN=${MAX_LEN:-$(( SIZE_POSITIONS < 384 ? SIZE_POSITIONS : 384 ))}
STRIDE=$(( MAX_LEN / 3 < 128 ? MAX_LEN / 3 : 128 )); QUERY=$(( MAX_LEN / 6 < 64 ? MAX_LEN / 6 : 64 ))
echo "finetune.sh: $UPDATES updates ($WARMUP of warm-up), batches of $BSZ x $FREQ" >&2
SAVE_DIR=${SAVE_DIR:-checkpoints/squad}
fairseq-train "$DATA" --user-dir "$REPO/truneg_fairseq" --task squad --criterion squad "${SIZE_FLAGS[@]}" \
  "${TOK[@]}" --squad-max-len "$MAX_LEN" --squad-doc-stride "$STRIDE" --squad-max-query "$QUERY" \
  --restore-file "$CKPT" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler \
  --batch-size "$BSZ" --required-batch-size-multiple 1 --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-6 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP" \
  --total-num-update "$UPDATES" --max-update "$UPDATES" --clip-norm 1.0 ${FP16-$(mixed_precision_flag)} --num-workers 0 \
  --best-checkpoint-metric f1 --maximize-best-checkpoint-metric --no-epoch-checkpoints \
  --save-dir "$SAVE_DIR" --log-format simple --log-interval 50 "$@"
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python}" "$REPO/scripts/squad_predict.py" \
  "$SAVE_DIR/checkpoint_best.pt" --data "$DATA" --output "$SAVE_DIR/predictions.json"
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python}" "$REPO/scripts/squad_eval.py" \
  "$DATA/valid.json" "$SAVE_DIR/predictions.json"
