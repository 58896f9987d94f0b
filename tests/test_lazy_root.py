"""The package root registers the plugin with fairseq on import everywhere but in the package's
own commands, which register it once their command line is parsed (truneg_fairseq/__init__.py):
``import truneg_fairseq`` leaves every name registered and every mend installed, a second
registration changes nothing, a command's process waits, and a command past parsing is
registered. ``--help`` of every console command importing neither fairseq nor torch is checked
in tests/test_console_commands.py, on the installed commands."""

import os
import subprocess
import sys
import textwrap

import pytest
import tomllib
from repo_paths import REPO

import truneg_fairseq
from truneg_fairseq import started_as_command


def _python(args, cwd=None):
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        timeout=120,
    )


# what a process holds once the plugin is registered: one name of each kind fairseq looks up,
# the mends' flags, and the objects a second registration would wrap again
REGISTERED = """
import atexit, sys
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.optim import OPTIMIZER_REGISTRY
from fairseq.registry import REGISTRIES
from fairseq.tasks import TASK_REGISTRY
from fairseq.tasks.masked_lm import MaskedLMTask
from fairseq.trainer import Trainer
from truneg_fairseq import compat
names = (
    "mlm_hard_correction" in CRITERION_REGISTRY, "electra_small" in ARCH_MODEL_REGISTRY,
    "fused_adamw" in OPTIMIZER_REGISTRY, "wordpiece" in REGISTRIES["bpe"]["registry"],
    "electra" in TASK_REGISTRY, compat._installed, isinstance(MaskedLMTask.args, property),
)
print("registered", all(names), names)
"""


def test_import_registers_the_plugin_and_a_second_registration_changes_nothing():
    """A fresh interpreter's ``import truneg_fairseq``: criterions, architectures, tasks, the
    ``fused_adamw`` optimizer, the ``wordpiece`` BPE and the mends in place; ``register()`` and
    ``compat.install()`` again wrap nothing twice and add no exit handler."""
    code = (
        "import truneg_fairseq\n"
        + REGISTERED
        + textwrap.dedent(
            """
            import fairseq.checkpoint_utils as cu
            before = (Trainer.state_dict, Trainer._reduce_and_log_stats, cu.torch_persistent_save,
                      atexit._ncallbacks())
            truneg_fairseq.register()
            compat.install()
            after = (Trainer.state_dict, Trainer._reduce_and_log_stats, cu.torch_persistent_save,
                     atexit._ncallbacks())
            print("unchanged", before == after)
            """
        )
    )
    proc = _python(["-c", code])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "registered True" in proc.stdout, proc.stdout
    assert "unchanged True" in proc.stdout, proc.stdout


def test_a_command_waits_and_registers_once_its_line_is_parsed(tmp_path):
    """A process started as a command (here a wrapper of ``truneg-glue-table``, as scripts/
    holds) imports the package without fairseq or torch; parsing its command line registers
    everything ``import truneg_fairseq`` does."""
    wrapper = tmp_path / "glue_table.py"
    wrapper.write_text(
        "import sys\n"
        "from truneg_fairseq.cli.glue_table import main\n"
        "from truneg_fairseq.cli.glue_table import get_parser\n"
        "print('waits', not {'fairseq', 'torch'} & set(sys.modules))\n"
        "get_parser().parse_args(['runs'])\n" + REGISTERED
    )
    proc = _python([wrapper], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "waits True" in proc.stdout, proc.stdout
    assert "registered True" in proc.stdout, proc.stdout


def test_which_command_lines_are_the_packages_commands(tmp_path):
    """The console commands, ``-m truneg_fairseq.cli.<name>`` and a wrapper of a command module
    are commands (interpreter options before them skipped); fairseq's commands, ``-c``, pytest,
    a multiprocessing worker, an unrelated script of a command's name and an unknown command
    line are not."""
    py = sys.executable
    bin_dir = os.path.dirname(py)
    wrapper = REPO / "scripts" / "demo.py"
    other = tmp_path / "demo.py"
    other.write_text("import truneg_fairseq\n")
    commands = [
        [py, os.path.join(bin_dir, "truneg-demo"), "--help"],
        [py, "-X", "importtime", "-u", os.path.join(bin_dir, "truneg-study")],
        [py, "-m", "truneg_fairseq.cli.evaluate_mlm", "--help"],
        [py, "-W", "ignore", "-mtruneg_fairseq.cli.demo"],
        [py, str(wrapper), "--quick"],
    ]
    others = [
        [py, os.path.join(bin_dir, "fairseq-train"), "data-bin", "--user-dir", "truneg_fairseq"],
        [py, "-c", "import truneg_fairseq"],
        [py, "-m", "pytest", "tests/test_console_commands.py"],
        [py, "-c", "from multiprocessing.spawn import spawn_main", "--multiprocessing-fork"],
        [py, str(other)],
        [py, str(REPO / "scripts" / "missing.py")],
        [py],
        [],
    ]
    assert [started_as_command(a) for a in commands] == [True] * len(commands)
    assert [started_as_command(a) for a in others] == [False] * len(others)
    assert not started_as_command()  # pytest's own process registers on import


def test_the_commands_the_root_knows_are_pyprojects():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(truneg_fairseq.COMMANDS) == sorted(scripts)


def test_hf_train_flags_are_the_registry_s():
    """``truneg-hf-train --objective`` offers every registered objective and a flag for each of
    their parameters (its ``--help`` imports no torch: tests/test_console_commands.py)."""
    from truneg_fairseq.cli import hf_train
    from truneg_fairseq.core import objectives

    actions = {a.dest: a for a in hf_train.build_parser()._actions}
    assert tuple(actions["objective"].choices) == objectives.names()
    for _, param in objectives.all_params():
        assert actions[param.name].option_strings == [param.flag]


SHAPES = {
    # a wrapper of a command module (what scripts/ holds), using fairseq before main runs
    "wrapper.py": "from truneg_fairseq.cli.evaluate_mlm import main\n",
    # named like a console command
    "truneg-evaluate": "import truneg_fairseq\n",
    # a command's name and a command's main imported
    "truneg-demo": "from truneg_fairseq.cli.demo import main\n",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_script_taken_for_a_command_never_meets_an_unregistered_fairseq(tmp_path, name):
    """A script the root takes for one of its commands waits (no fairseq, no torch after the
    package's import), but once anything in it imports fairseq, before any command line is
    parsed, every name is registered and every mend is in place (the hub's archive check)."""
    script = tmp_path / name
    script.write_text(
        "import sys\n"
        + SHAPES[name]
        + "print('waits', not {'fairseq', 'torch'} & set(sys.modules))\n"
        + "from fairseq import file_utils\n"
        + "print('safe archives', getattr(file_utils.load_archive_file, 'truneg_safe', False))\n"
        + REGISTERED
    )
    assert started_as_command([sys.executable, str(script)])
    proc = _python([script], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "waits True" in proc.stdout, proc.stdout
    assert "safe archives True" in proc.stdout, proc.stdout
    assert "registered True" in proc.stdout, proc.stdout


def test_hf_train_refuses_a_model_dir_before_importing_torch(tmp_path):
    """truneg-hf-train checks MODEL_DIR as soon as its line is parsed: a missing folder, one
    without config.json and an encoder without a masked-LM head are each one error, with none of
    torch, transformers or fairseq imported (they take seconds); checked on the console command
    with the interpreter's import log."""
    from pathlib import Path

    headless = tmp_path / "headless"
    headless.mkdir()
    (headless / "config.json").write_text('{"architectures": ["BertModel"], "model_type": "bert"}')
    (tmp_path / "empty").mkdir()
    script = Path(sys.executable).with_name("truneg-hf-train")
    for model, said in (
        (tmp_path / "missing", "is not a local model directory"),
        (tmp_path / "empty", "has no config.json"),
        (headless, "--allow-fresh-head"),
    ):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", str(script), str(model), "--train", "t.txt",
             "--output-dir", "out"],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
        assert not imported & {"torch", "transformers", "fairseq"}, said
