# Sourced by the recipes: checks of the paths they hand to fairseq, and the sizes an import or a
# checkpoint recorded (so no recipe hard-codes a model size).
# Every recipe quotes its paths, so spaces, commas, quotes and non-ASCII characters reach fairseq
# intact; fairseq itself splits a few of them, which is refused here with the reason.

# check_data_path NAME PATH: fairseq's masked_lm/electra/cline tasks read several data
# directories separated by ':' (os.pathsep), so a data directory whose path holds ':' would be
# read as two; refused up front
check_data_path() {
  case "$2" in
    *:*) echo "error: $1 '$2' holds ':', which fairseq reads as a separator between data directories:" \
              "move or link the directory to a path without ':'" >&2; exit 2 ;;
  esac
}

# sharded_data DATA_BIN: DATA = the data argument of fairseq-train for DATA_BIN: DATA_BIN itself,
# or, for a data-bin that truneg-prepare-corpus --shards N wrote, DATA_BIN:DATA_BIN/shard1:...
# (fairseq trains epoch e on shard (e - 1) mod N; said once on stderr)
sharded_data() {
  local k=1
  DATA=$1
  while [ -f "$1/shard$k/train.idx" ]; do DATA="$DATA:$1/shard$k"; k=$((k + 1)); done
  if [ "$k" -gt 1 ]; then
    echo "$(basename "$0"): $1 holds the training split in $k shards: one shard an epoch" >&2
  fi
}

# import_positions IMPORT_JSON: the position count an import recorded (BERT's max_positions or
# ELECTRA's electra_max_positions)
import_positions() {
  "${PYTHON:-python}" - "$1" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1], encoding="utf-8"))
args = info.get("model_args") if isinstance(info, dict) else None
pos = [args.get(k) for k in ("max_positions", "electra_max_positions")] if isinstance(args, dict) else []
pos = [p for p in pos if isinstance(p, int)]
if not pos:
    sys.exit(f"error: {sys.argv[1]} records no model sizes: import the model again with scripts/convert_hf.py import")
print(pos[0])
EOF
}

# checkpoint_size_flags CHECKPOINT: sets SIZE_FLAGS to the fairseq-train flags that build the
# checkpoint's model again (--arch and every size it records, positions included) and
# SIZE_POSITIONS to its position count
checkpoint_size_flags() {
  local out
  out=$(PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python}" - "$1" <<'EOF'
import sys
from truneg_fairseq.pipelines.glue_run_config import GlueFinetuneError, checkpoint_model, positions, size_flags
try:
    print(positions(checkpoint_model(sys.argv[1])))
    print("\n".join(size_flags(sys.argv[1])))
except GlueFinetuneError as e:
    sys.exit(f"error: {e}")
EOF
) || exit 2  # the error is on stderr; no flag of a refused checkpoint is used
  SIZE_POSITIONS=${out%%$'\n'*}
  mapfile -t SIZE_FLAGS <<< "${out#*$'\n'}"
}
