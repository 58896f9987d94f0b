"""The recipes in a new shell where the project's virtualenv is not activated: fairseq-train is
taken from the checkout's ``.venv`` (what ``make install`` creates), said once on stderr; with no
``.venv`` either, one error says how to install and activate it."""

import os
import shutil
import subprocess
import sys

import pytest
from repo_paths import REPO

# a PATH without the virtualenv: the system's folders only
BARE_PATH = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])


def _checkout(tmp_path, with_venv: bool):
    """A copy of the checkout's examples next to its package, with a ``.venv`` whose bin is
    this interpreter's when ``with_venv``."""
    repo = tmp_path / "checkout"
    shutil.copytree(REPO / "examples", repo / "examples")
    (repo / "truneg_fairseq").symlink_to(REPO / "truneg_fairseq")
    if with_venv:
        (repo / ".venv").mkdir()
        (repo / ".venv" / "bin").symlink_to(os.path.dirname(sys.executable))
    return repo


def _run(repo, recipe, args, path):
    env = dict(os.environ, PATH=path, OMP_NUM_THREADS="1", FP16="")
    return subprocess.run(
        ["bash", str(repo / "examples" / recipe), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(repo.parent),
        timeout=120,
    )


def test_bare_path_lacks_fairseq_train():
    assert shutil.which("fairseq-train", path=BARE_PATH) is None


def test_a_recipe_finds_the_checkouts_virtualenv(tmp_path):
    repo = _checkout(tmp_path, with_venv=True)
    (tmp_path / "data").mkdir()
    r = _run(repo, "mlm/pretrain.sh", [str(tmp_path / "data"), "masked_lm", "--help"], BARE_PATH)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage: fairseq-train" in r.stdout
    assert f"using the project's virtualenv {repo}/.venv" in r.stderr
    assert "source " + str(repo / ".venv" / "bin" / "activate") in r.stderr


@pytest.mark.parametrize(
    "recipe, needs",
    [
        ("mlm/pretrain.sh", "fairseq-train"),
        ("glue/finetune.sh", "fairseq-train"),
        ("hf/continue.sh", "truneg-hf-train"),  # the HF side alone is enough there
    ],
)
def test_without_a_virtualenv_one_error_says_how_to_get_one(recipe, needs, tmp_path):
    repo = _checkout(tmp_path, with_venv=False)
    r = _run(repo, recipe, ["a", "b", "c", "d"], BARE_PATH)
    assert r.returncode == 127, r.stderr[-2000:]
    assert r.stderr.startswith(f"error: {needs} not found: install "), r.stderr
    assert "make install" in r.stderr and "activate" in r.stderr
    if needs == "truneg-hf-train":
        assert "requirements-hf.txt" in r.stderr


def test_an_active_environment_is_used_as_it_is(tmp_path):
    """fairseq-train on PATH already: the recipe says nothing about a virtualenv."""
    repo = _checkout(tmp_path, with_venv=True)
    path = os.path.dirname(sys.executable) + os.pathsep + BARE_PATH
    r = _run(repo, "mlm/pretrain.sh", [str(tmp_path), "masked_lm", "--help"], path)
    assert r.returncode == 0 and "usage: fairseq-train" in r.stdout, r.stderr[-2000:]
    assert "virtualenv" not in r.stderr
