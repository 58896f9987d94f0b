# Sourced by the recipes right after REPO is set: a new shell where the project's virtualenv is
# not activated still finds the command the recipe runs (VENV_COMMAND, default fairseq-train;
# the HuggingFace recipe sets truneg-hf-train, so it runs where only the HF side is installed)
# and the Python that has the package. When that command is not on PATH and REPO/.venv (what
# `make install` creates) has it, REPO/.venv/bin goes first on PATH for this recipe (said once on
# stderr); when neither has it, one error says how to get it.
use_project_venv() {
  local need=${VENV_COMMAND:-fairseq-train} how
  command -v "$need" >/dev/null 2>&1 && return 0
  if [ -x "$REPO/.venv/bin/$need" ]; then
    export PATH="$REPO/.venv/bin:$PATH"
    echo "$(basename "$0"): using the project's virtualenv $REPO/.venv ($need is not on PATH;" \
         "activate it in this shell with: source $REPO/.venv/bin/activate)" >&2
    return 0
  fi
  how="install the project with 'make install' in $REPO, then 'source $REPO/.venv/bin/activate'"
  if [ "$need" = truneg-hf-train ]; then
    how="install the HuggingFace side (pip install -r $REPO/requirements-hf.txt && pip install --no-deps -e $REPO, docs/hf.md) or the whole project ('make install' in $REPO), then activate that environment"
  fi
  echo "error: $need not found: $how (or put an environment that has it on PATH)" >&2
  exit 127
}
use_project_venv
