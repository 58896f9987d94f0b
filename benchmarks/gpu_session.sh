#!/usr/bin/env bash
# The GPU check on a machine without the package registry, in at most 9 minutes: installs
# fairseq and its few missing needs from the wheels carried in .whl/ (made beforehand, on a
# machine with the registry, by prepare-wheels.sh: fairseq-fixed 0.12.3.1, bitarray,
# hydra-core, omegaconf, antlr4, nltk, tensorboardX; the machine has torch, transformers,
# numpy, sentencepiece), then runs benchmarks/gpu_check.py and writes its report under $OUT.
#
#   OUT=/path/to/results bash benchmarks/gpu_session.sh            # default budget 420 s
#   BUDGET_S=280 OUT=... bash benchmarks/gpu_session.sh            # the `make gpu-check` budget
#   ROWS=train,correct OUT=... bash benchmarks/gpu_session.sh      # some rows only (--rows)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the directory for the report}
BUDGET_S=${BUDGET_S:-420}
SITE=${SITE:-/tmp/site}
mkdir -p "$OUT"
t0=$(date +%s)
if ! python3 -c "import fairseq" 2>/dev/null; then
  ls .whl/*.whl >/dev/null 2>&1 || { echo "error: no .whl/*.whl here: run prepare-wheels.sh on a machine with the registry and carry .whl/" >&2; exit 2; }
  python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl
  export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "set-up: $(( $(date +%s) - t0 )) s"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
# the check stops itself at its budget; the outer limit only guards against a hang
set +e
timeout --kill-after 15 $(( BUDGET_S + 60 )) python3 benchmarks/gpu_check.py \
  --budget-s "$BUDGET_S" --out-dir "$OUT/gpu-check" ${ROWS:+--rows "$ROWS"} "$@" \
  2>&1 | tee "$OUT/gpu-check.log" | grep --line-buffered '^\[gpu-check\]'
status=${PIPESTATUS[0]}
set -e
echo "total: $(( $(date +%s) - t0 )) s; exit $status; report: $OUT/gpu-check/report.md"
if [ -f "$OUT/gpu-check/report.md" ]; then head -40 "$OUT/gpu-check/report.md"; fi
exit "$status"
