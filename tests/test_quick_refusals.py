"""A command line that cannot run is refused at once: one usage line, exit status 2, no
traceback, and neither fairseq, torch nor transformers imported (``-X importtime``) -- for
``truneg-train-help`` without a model, ``truneg-evaluate`` without checkpoints or data, the
demo and the study without a work directory (they would otherwise start a full run in the
current directory) and the HF example program."""

import pytest
from command_runs import imported_modules, run_command
from repo_paths import REPO

HEAVY = {"fairseq", "torch", "transformers"}


def _said(stderr: str) -> list:
    """stderr without the import log."""
    return [line for line in stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.parametrize(
    "script,args,expected",
    [
        ("scripts/train_help.py", ["--bogus-flag"], "unrecognized arguments: --bogus-flag ("),
        ("scripts/train_help.py", ["--task", "masked_lm"], "required: --arch"),
        ("scripts/evaluate_mlm.py", [], "give at least one checkpoint"),
        ("scripts/evaluate_mlm.py", ["ck.pt"], "give exactly one of --data"),
        ("scripts/demo.py", [], "required: --workdir"),
        ("examples/study/run_study.py", [], "required: --workdir"),
        ("examples/hf/trainer_api.py", [], "required: MODEL_DIR, TEXT_FILE, OUT_DIR"),
    ],
)
def test_refused_before_the_heavy_imports(script, args, expected, tmp_path):
    proc = run_command([REPO / script, *args], tmp_path, importtime=True)
    said = _said(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in said[-1], said
    assert "Traceback" not in proc.stderr
    heavy = HEAVY & imported_modules(proc.stderr)
    assert not heavy, f"{script} imported {heavy}"
    assert not any(tmp_path.iterdir()), "a refused command wrote into the current directory"


def test_the_hf_example_answers_help(tmp_path):
    proc = run_command(
        [REPO / "examples" / "hf" / "trainer_api.py", "--help"], tmp_path, importtime=True
    )
    assert proc.returncode == 0 and "MODEL_DIR TEXT_FILE OUT_DIR" in proc.stdout, proc.stderr
    assert not HEAVY & imported_modules(proc.stderr)


def test_train_help_answers_help_with_its_usage(tmp_path):
    proc = run_command([REPO / "scripts" / "train_help.py", "--help"], tmp_path, importtime=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: truneg-train-help [-h] --arch ARCH")
    for flag in ("--user-dir", "--task", "--criterion", "--optimizer", "--lr-scheduler"):
        assert f"  {flag} " in proc.stdout, flag
    assert "Example:" in proc.stdout
    assert not HEAVY & imported_modules(proc.stderr)


def test_train_help_names_a_flag_its_command_line_does_not_have(tmp_path):
    """With a model given, a flag that no part of that fairseq-train command line declares is
    one usage line naming it (fairseq's own parse would have dropped it silently)."""
    argv = ["--user-dir", REPO / "truneg_fairseq", "--arch", "roberta_base", "--bogus-flag"]
    proc = run_command([REPO / "scripts" / "train_help.py", *argv], tmp_path, importtime=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "unrecognized arguments: --bogus-flag" in _said(proc.stderr)[-1]
    bad_arch = run_command(
        [REPO / "scripts" / "train_help.py", "--arch", "nope"], tmp_path, importtime=True
    )
    assert bad_arch.returncode == 2 and "invalid choice: 'nope'" in bad_arch.stderr
    assert "Traceback" not in bad_arch.stderr


def test_train_help_takes_data_anywhere_and_training_flags():
    from truneg_fairseq.cli.train_help import main

    argv = ["--task", "masked_lm", "--arch", "roberta_base", "DATA", "--lr", "1e-4"]
    assert main([*argv, "--criterion", "mlm_hard_correction"]) == 0
