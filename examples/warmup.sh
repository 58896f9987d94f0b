# The warm-up stage shared by examples/bert/pretrain.sh and examples/electra/pretrain.sh: a
# masked-LM part that a published model lacks (BERT's MLM head, ELECTRA's generator) starts
# fresh and is trained alone, the rest frozen, before any continued pre-training; every
# criterion then starts from that one checkpoint. Sourced, not run.

# warmup_flags "PREFIX..." ARG...: WARMUP_FLAGS = the ARGs without the flags (and their values)
# that start with one of the PREFIXes: the continued criterion's own, which the warm-up's
# criterion does not take
warmup_flags() {
  local prefixes=$1 skip_value=0 a p drop
  shift
  WARMUP_FLAGS=()
  for a in "$@"; do
    if [ "$skip_value" = 1 ]; then skip_value=0; case "$a" in --*) ;; *) continue ;; esac; fi
    drop=0
    for p in $prefixes; do
      case "$a" in "$p"*=*) drop=1 ;; "$p"*) drop=1; skip_value=1 ;; esac
    done
    if [ "$drop" = 0 ]; then WARMUP_FLAGS+=("$a"); fi
  done
}

# warm_up DIR UPDATES WHAT COMMAND...: run COMMAND (the warm-up's fairseq-train, saving into DIR
# with --save-interval-updates UPDATES) unless DIR already holds the checkpoint of update
# UPDATES made by the same COMMAND from the same inputs (DIR/.truneg-stages.json records the
# command with the fingerprints of the files and data-bin it read); WARM_CHECKPOINT = that
# checkpoint. A warm-up that stopped earlier is run again; a finished one made otherwise is an
# error saying what differs.
stage_record() {
  PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python}" -m truneg_fairseq.cli.stage_record "$@"
}

warm_up() {
  local dir=$1 updates=$2 what=$3 why rc
  shift 3
  WARM_CHECKPOINT=$(ls "$dir"/checkpoint_*_"$updates".pt 2>/dev/null | head -n 1 || true)
  if [ -n "$WARM_CHECKPOINT" ]; then
    rc=0
    why=$(stage_record check "$dir" warm-up -- "$@" 2>&1) || rc=$?
    if [ "$rc" = 0 ]; then
      echo "pretrain.sh: the warm-up in $dir is complete ($(basename "$WARM_CHECKPOINT")) and was made by" \
           "this warm-up's command from the same inputs: continuing from it (remove $dir to warm up again)" >&2
      return 0
    fi
    echo "error: $dir holds a finished warm-up that is not this one: $why. Remove $dir to warm up" \
         "again, or give another HEAD_DIR" >&2
    exit 1
  fi
  if [ -f "$dir/checkpoint_last.pt" ]; then
    echo "pretrain.sh: $dir holds an unfinished warm-up (no checkpoint at update $updates): warming up again" \
         "from the import" >&2
  fi
  echo "pretrain.sh: $what" >&2
  "$@"
  WARM_CHECKPOINT=$(ls "$dir"/checkpoint_*_"$updates".pt 2>/dev/null | head -n 1 || true)
  if [ -z "$WARM_CHECKPOINT" ]; then
    echo "error: the warm-up stopped before update $updates (no $dir/checkpoint_*_$updates.pt): see its log" \
         "above" >&2
    exit 1
  fi
  stage_record record "$dir" warm-up -- "$@"
}
