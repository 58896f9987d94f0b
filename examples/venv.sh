# Sourced by the recipes right after REPO is set: a new shell where the project's virtualenv is
# not activated still finds fairseq-train and the Python that has the package. When
# fairseq-train is not on PATH and REPO/.venv (what `make install` creates) has it, REPO/.venv/bin
# goes first on PATH for this recipe (said once on stderr); when neither has it, one error says
# how to get it.
use_project_venv() {
  command -v fairseq-train >/dev/null 2>&1 && return 0
  if [ -x "$REPO/.venv/bin/fairseq-train" ]; then
    export PATH="$REPO/.venv/bin:$PATH"
    echo "$(basename "$0"): using the project's virtualenv $REPO/.venv (fairseq-train is not on PATH;" \
         "activate it in this shell with: source $REPO/.venv/bin/activate)" >&2
    return 0
  fi
  echo "error: fairseq-train not found: install the project with 'make install' in $REPO, then" \
       "'source $REPO/.venv/bin/activate' (or put an environment with fairseq on PATH)" >&2
  exit 127
}
use_project_venv
