#!/usr/bin/env bash
# Continue a local HuggingFace checkpoint (BERT, RoBERTa, an ELECTRA pair, ...) on text with a
# counter-false-negative objective, with transformers' Trainer (truneg-hf-train).
#
#   bash examples/hf/continue.sh MODEL_DIR TEXT OBJECTIVE [extra truneg-hf-train flags]
#
# MODEL_DIR  a save_pretrained directory with its tokenizer (nothing is downloaded; fetch a hub
#            model first: `hf download bert-base-uncased --local-dir bert-base-uncased`). An ELECTRA
#            discriminator with GENERATOR=DIR set: ELECTRA pre-training, the objective on its generator
# TEXT       a text file or a folder of .txt files, one example per non-empty line
# OBJECTIVE  mlm | hard_correction | soft_reg | sent_kl
#
# Every visible GPU trains (torchrun, one process each; NPROC overrides, e.g. NPROC=2 CPU=1 for two
# CPU processes over gloo). The paper's BERT setting: 200k updates, batch 128, seq 512, lr 5e-5;
# the defaults give batch 128 on one GPU (BATCH x ACCUM x processes). OUT (default
# runs/<model>_<objective>) holds checkpoint-N every SAVE_STEPS; running the same command again
# resumes from the last one. MAX_STEPS, LR, WARMUP, SEQ, BATCH, ACCUM, SAVE_STEPS override.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV_COMMAND=truneg-hf-train  # what this recipe needs: the HF side alone is enough, no fairseq
. "$REPO/examples/venv.sh"  # truneg-hf-train from REPO/.venv when no environment is active
USAGE="usage: continue.sh MODEL_DIR TEXT OBJECTIVE [flags]"
MODEL=${1:?$USAGE}
TEXT=${2:?$USAGE}
OBJECTIVE=${3:?$USAGE}
shift 3
MAX_STEPS=${MAX_STEPS:-200000}
WARMUP=${WARMUP:-$(( MAX_STEPS * 6 / 100 < 10000 ? MAX_STEPS * 6 / 100 : 10000 ))}  # 6% of MAX_STEPS, at most 10000
OUT=${OUT:-runs/$(basename "$MODEL")_${OBJECTIVE}}
if [ -n "${CPU:-}" ]; then
  NPROC=${NPROC:-1}
  DEVICE=(--cpu)
else
  NPROC=${NPROC:-$("${PYTHON:-python}" -c "import torch; print(max(torch.cuda.device_count(), 1))")}
  DEVICE=()
fi
GEN=()
if [ -n "${GENERATOR:-}" ]; then
  GEN=(--generator "$GENERATOR")
fi
exec "${PYTHON:-python}" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" \
  "$(dirname "$0")/../../scripts/hf_train.py" "$MODEL" --train "$TEXT" --output-dir "$OUT" \
  --objective "$OBJECTIVE" "${GEN[@]}" "${DEVICE[@]}" \
  --max-steps "$MAX_STEPS" --lr "${LR:-5e-5}" --warmup-steps "$WARMUP" \
  --seq-len "${SEQ:-512}" --batch-size "${BATCH:-32}" --grad-accum "${ACCUM:-4}" \
  --save-steps "${SAVE_STEPS:-5000}" --log-steps 100 "$@"
