"""A command run without ``OMP_NUM_THREADS`` chooses its torch threads (cores / local processes,
less the busy cores, at least 1) before torch is imported, says so once, and leaves a value the
user set alone."""

import os
import subprocess
import sys

import pytest

from truneg_fairseq.cli.threads import choose_threads

PROGRAM = (
    "import os, sys\n"
    "from truneg_fairseq.cli.args import command_parser\n"
    "command_parser('a command').parse_args([])\n"
    "import torch\n"
    "print(os.environ['OMP_NUM_THREADS'], torch.get_num_threads())\n"
)


def _run(**env):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "LOCAL_WORLD_SIZE")}
    return subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        env=dict(base, **env),
        timeout=120,
    )


@pytest.mark.parametrize(
    "cores,processes,load,want",
    [
        (8, 1, 0.0, 8),
        (8, 4, 0.0, 2),
        (2, 1, 4.0, 1),
        (16, 1, 6.2, 10),
        (2, 3, 0.0, 1),
        (1, 1, 0, 1),
    ],
)
def test_choose_threads(cores, processes, load, want):
    assert choose_threads(cores, processes, load) == want


def test_unset_is_chosen_before_torch_and_said_once():
    proc = _run(LOCAL_WORLD_SIZE="64")  # more processes than cores: one thread each
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["1", "1"]
    notes = [line for line in proc.stderr.splitlines() if "OMP_NUM_THREADS is unset" in line]
    assert len(notes) == 1 and "using 1 CPU thread(s)" in notes[0] and "64 process(es)" in notes[0]


def test_a_value_the_user_set_is_kept():
    proc = _run(OMP_NUM_THREADS="3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[0] == "3" and "OMP_NUM_THREADS" not in proc.stderr


def test_a_command_says_it_once(tmp_path):
    """A real command (its checkpoint missing): the note once, before its own error."""
    from repo_paths import REPO

    base = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "evaluate_mlm.py"), "no.pt", "--data", "nowhere"],
        capture_output=True,
        text=True,
        env=base,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.count("OMP_NUM_THREADS is unset") == 1
