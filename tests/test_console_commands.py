"""The console commands pyproject.toml declares ([project.scripts]) are installed next to the
interpreter and work from any directory: each answers --help without importing fairseq or torch,
and a real one builds a synonym table from a directory outside the checkout."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
from command_runs import imported_modules, run_command
from repo_paths import REPO

BIN = Path(sys.executable).parent
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def _command(name: str) -> Path:
    path = BIN / name
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: install the package into this environment (make install, or "
            f"pip install --no-deps -e {REPO}) to put its console commands there"
        )
    return path


def test_every_command_follows_the_naming_and_has_a_module():
    """truneg-* names, one entry point each, ``main`` of a module in truneg_fairseq.cli."""
    assert len(SCRIPTS) == len(set(SCRIPTS.values())) >= 17
    for name, target in SCRIPTS.items():
        assert name.startswith("truneg-") and name == name.lower(), name
        module, func = target.split(":")
        assert module.startswith("truneg_fairseq.cli.") and func == "main", target


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_from_another_directory(name, tmp_path):
    module = SCRIPTS[name].split(":")[0]
    if importlib.util.find_spec(module) is None:
        # declared for a command another change adds (cli/prepare_corpus, cli/evaluate_mlm,
        # cli/demo): checked once that module exists
        pytest.skip(f"{module} is not in this checkout yet")
    # the interpreter's import log (-X importtime, on stderr): --help needs neither fairseq nor
    # torch (the package root registers the plugin once a command line is parsed)
    proc = run_command([_command(name), "--help"], tmp_path, importtime=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout.lower() or "example" in proc.stdout.lower(), proc.stdout[:500]
    assert "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir()), "--help wrote files into the current directory"
    imported = imported_modules(proc.stderr)
    assert "truneg_fairseq.cli" in imported  # the log is there
    assert not {"fairseq", "torch", "transformers"} & imported, f"{name} --help imports them"


def test_build_synonyms_from_another_directory(tmp_path, corpus_dir, data_bin, synonym_table):
    """truneg-build-synonyms run in an empty directory (relative output path) writes the table
    the library builds for the session corpus."""
    proc = run_command(
        [
            _command("truneg-build-synonyms"),
            "--dict",
            data_bin / "dict.txt",
            "--tokenizer",
            "sentencepiece",
            "--spm-model",
            corpus_dir / "spm.model",
            "--output",
            "table.npz",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "synonym pairs" in proc.stdout and " | INFO | " in proc.stdout
    from truneg_fairseq.lexicon import SynonymTable

    built, want = SynonymTable.load(tmp_path / "table.npz"), SynonymTable.load(synonym_table)
    assert len(built.pairs) > 0 and np.array_equal(built.pairs, want.pairs)
    assert built.fingerprint == want.fingerprint
    # a bad flag is one clear error from the command too
    bad = run_command([_command("truneg-build-synonyms"), "--tokenizer", "whitespace"], tmp_path)
    assert bad.returncode == 2 and "--dict" in bad.stderr and "Traceback" not in bad.stderr


def test_train_help_finds_the_plugin_from_another_directory(tmp_path):
    """``--user-dir truneg_fairseq`` names the installed package where no such folder is."""
    proc = run_command(
        [
            _command("truneg-train-help"),
            "--user-dir",
            "truneg_fairseq",
            "--task",
            "electra",
            "--arch",
            "electra_small",
            "--criterion",
            "mlm_hard_correction",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--synonym-table" in proc.stdout and "--electra-gen-layers" in proc.stdout
