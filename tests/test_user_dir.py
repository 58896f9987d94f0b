"""fairseq-train with the plugin as its --user-dir: the plugin is one package whatever name its
directory is given (fairseq imports the directory's basename: a symbolic link or a copy of
another name registers nothing twice), and Ctrl-C during a run is one line and exit status 130,
as the package's own commands say it."""

import os
import shutil
import subprocess
import sys

from failures import interrupted
from fairseq_runs import TINY_ROBERTA, fairseq_train, train_argv
from repo_paths import REPO, USER_DIR

ONE_UPDATE = [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--max-update", "1"]


def test_a_user_dir_linked_under_another_name_registers_once(data_bin, synonym_table, tmp_path):
    link = tmp_path / "links" / "cfn_plugin_link"
    link.parent.mkdir()
    link.symlink_to(USER_DIR, target_is_directory=True)
    args = [*ONE_UPDATE, "--synonym-table", str(synonym_table), "--user-dir", str(link)]
    proc = fairseq_train(data_bin, tmp_path / "run", args, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Cannot register duplicate" not in proc.stderr
    assert (tmp_path / "run" / "checkpoint_last.pt").is_file()
    import truneg_fairseq

    assert sys.modules["cfn_plugin_link"] is truneg_fairseq
    assert sys.modules["cfn_plugin_link.criterions"] is sys.modules["truneg_fairseq.criterions"]


def test_a_copy_of_another_name_is_the_package_too(tmp_path):
    """A copy of the package, imported by its own name where no truneg_fairseq is importable:
    it loads itself as truneg_fairseq, once."""
    copy = tmp_path / "copies" / "plugin_copy"
    shutil.copytree(USER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import plugin_copy, truneg_fairseq; "
        "import plugin_copy.tasks.electra as a, truneg_fairseq.tasks.electra as b; "
        "assert plugin_copy is truneg_fairseq and a is b; "
        "assert truneg_fairseq.__file__.startswith(sys.argv[1]); print('one package')"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(copy.parent)], capture_output=True, text=True, env=env,
        cwd=str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0 and "one package" in proc.stdout, proc.stderr[-3000:]


def test_ctrl_c_in_fairseq_train_is_one_line_and_status_130(data_bin, synonym_table, tmp_path):
    argv = train_argv(data_bin, tmp_path / "run", [*ONE_UPDATE[:-1], "100000"])
    argv += ["--synonym-table", str(synonym_table), "--disable-validation"]
    code, err = interrupted(
        [sys.executable, "-m", "fairseq_cli.train", *argv],
        ("| train_inner |", "num_updates"),  # updates are being made
        cwd=str(tmp_path),
        env=dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO)),
    )
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "interrupted (Ctrl-C): nothing partial was written"
