# truneg-fairseq: set-up, demo and tests.
#   make demo   install everything, then run the built-in demo (WordNet-gloss corpus, 3 criterions);
#               a first small table (the first look) comes before the full run goes on
#   make demo-quick  the first look only (a short stage 1 and 2, scored at once), then stop
#   make study  RoBERTa and ELECTRA, 4 criterions each, scored at 20/40/60/80/100% of training, with plots
#   make test   install everything, then run the test suite (one worker per core, the 15 slowest
#               tests listed at the end)
#   make test-quick  the tests that train nothing end to end (losses, lookup, selection,
#               statistics, tokenizers, config checks, bad inputs): the edit-run loop
#   make bench  the CPU benchmarks (docs/benchmarks.md)
#   make gpu-check  run first on a new CUDA machine (<= 5 min): real fairseq-train with the recipes'
#               flags (words/s, ms/update, MFU), GPU busy share, HF transformers step, fp32/bf16/amp/fp16
#               loss agreement, data-loader rate; PASS/FAIL per row in gpu-check/report.md and
#               report.json. FULL=1: + every criterion eager/compiled/CUDA graphs (<= 15 min).
#               QUICK=1: tiny sizes, on the CPU when there is no GPU (budget 900 s there)
#   make lint   ruff (pinned in requirements-dev.txt): formatting checked, then the rules of
#               pyproject.toml [tool.ruff.lint]; needs only ruff, not the full install
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
WORDNET_DIR ?= /usr/share/wordnet
STAMP := $(VENV)/.installed

.PHONY: install wordnet demo demo-quick study test test-quick test-hf-alone bench gpu-check lint clean

install: $(STAMP) wordnet
	@echo "installed in $(VENV); activate it in your shell with: source $(VENV)/bin/activate (the recipes in examples/ find it without)"

$(STAMP): requirements.txt requirements-fairseq.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-deps --no-build-isolation -r requirements-fairseq.txt
	$(PIP) uninstall -q -y torchaudio 2>/dev/null || true
	$(PIP) install -q --no-deps -e .
	$(PY) -c "import fairseq, torch, nltk, sentencepiece, tensorboardX; print('fairseq', fairseq.__version__, 'torch', torch.__version__)"
	touch $(STAMP)

# Princeton WordNet 3.0 from Debian when no WordNet is available yet.
wordnet:
	@if [ -n "$$WNHOME" ] || [ -f $(WORDNET_DIR)/data.noun ] || [ -n "$$TRUNEG_SKIP_APT" ]; then \
	  true; \
	elif command -v apt-get >/dev/null; then \
	  echo "installing WordNet 3.0 (Debian wordnet-base, wordnet-sense-index)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq wordnet-base wordnet-sense-index >/dev/null; \
	else \
	  echo "WordNet not found: set WNHOME to a WordNet 3.0 dict directory or NLTK_DATA to an nltk data dir holding corpora/wordnet" >&2; \
	fi

demo: install
	$(PY) scripts/demo.py --workdir demo_work

demo-quick: install
	$(PY) scripts/demo.py --workdir demo_work --quick

# Correction ratios over training for RoBERTa and ELECTRA (examples/study/).
study: install
	$(PY) examples/study/run_study.py --scale cpu --workdir study_work

# pytest-xdist: one worker per core (TEST_WORKERS=0 runs the tests in this process); --dist
# loadfile keeps each test file on one worker, its module fixtures built once
TEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -q tests -n $(TEST_WORKERS) --dist loadfile

test: install
	$(PYTEST) --durations=15

test-quick: install
	$(PYTEST) -m "not slow" --durations=5

# The HuggingFace side installed alone (docs/hf.md): a fresh virtualenv with requirements-hf.txt
# and the package, no fairseq; truneg-hf-train, examples/hf/continue.sh and truneg-plot-run there
HF_VENV ?= .venv-hf
test-hf-alone:
	rm -rf $(HF_VENV) && $(PYTHON) -m venv $(HF_VENV)
	$(HF_VENV)/bin/python -m pip install -q --upgrade pip
	$(HF_VENV)/bin/python -m pip install -q -r requirements-hf.txt
	$(HF_VENV)/bin/python -m pip install -q --no-deps -e .
	PYTHONPATH=tests $(HF_VENV)/bin/python tests/hf_alone_check.py

# Benchmarks print numbers (docs/benchmarks.md); transformers is installed for the HF baseline only.
bench: install
	$(PIP) install -q -r requirements-bench.txt
	cd benchmarks && ../$(PY) criterion_overhead.py && ../$(PY) table_build.py && ../$(PY) electra_vs_hf.py --rounds 12 && ../$(PY) squad_throughput.py

# Rows under a time budget, the important first (benchmarks/gpu_check.py); transformers for the HF rows.
QUICK ?=
FULL ?=
gpu-check: install
	$(PIP) install -q -r requirements-bench.txt
	$(PY) benchmarks/gpu_check.py $(if $(filter-out 0,$(QUICK)),--quick) $(if $(filter-out 0,$(FULL)),--full)

# ruff alone in the virtualenv (created when missing): lint does not need fairseq or torch
lint:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -r requirements-dev.txt
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) demo_work study_work .pytest_cache
