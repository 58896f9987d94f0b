# Sourced by the RoBERTa and BERT recipes. mlm_compile_flags CRITERION sets COMPILE_FLAGS to the
# fairseq-train flags for COMPILE (0: none; model: the whole forward compiled with its backward;
# update: the whole update as one graph, CUDA graphs on a GPU), or says what is wrong and fails.
mlm_compile_flags() {
  COMPILE_FLAGS=()
  case "${COMPILE:-0}" in
    0) ;;
    model|update)
      if [ "$1" = masked_lm ]; then
        echo "error: COMPILE=$COMPILE compiles the plugin's criterions (mlm_plain," \
             "mlm_hard_correction, mlm_soft_reg, mlm_sent_kl); masked_lm trains eager: leave COMPILE unset," \
             "or train the same loss compiled as mlm_plain" >&2
        return 2
      fi
      COMPILE_FLAGS=(--batch-mlm-compile --batch-mlm-compile-scope "$COMPILE") ;;
    *)
      echo "error: COMPILE must be 0, model (the whole forward) or update (the whole update," \
           "CUDA graphs on a GPU), got '$COMPILE'" >&2
      return 2 ;;
  esac
}
