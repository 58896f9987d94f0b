"""fairseq-hydra-train with the recipes' configs writes nothing where it is started: hydra's
files go under the run's checkpoint directory, the working directory stays (so relative paths
read as typed) and TensorBoard's events go beside the checkpoints; hydra's default run
directories are ignored by git at the checkout's root, and only there."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from repo_paths import REPO

CONFIGS = sorted(
    p for p in (REPO / "examples").glob("*/config/*.yaml") if p.parent.parent.name != "glue"
)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_a_hydra_config_keeps_its_files_under_the_run(path: Path):
    cfg = OmegaConf.load(path)
    assert OmegaConf.select(cfg, "hydra.job.chdir") is False
    cfg.checkpoint = cfg.get("checkpoint") or {}
    cfg.checkpoint.save_dir = "/runs/x"
    assert cfg.hydra.run.dir == "/runs/x/hydra"
    assert cfg.common.tensorboard_logdir == "/runs/x/tb"


def test_hydras_run_directories_are_ignored_at_the_root_only():
    lines = (REPO / ".gitignore").read_text().splitlines()
    assert "/outputs/" in lines and "/multirun/" in lines
    assert "outputs/" not in lines  # would hide the package's truneg_fairseq/outputs/
    assert (REPO / "truneg_fairseq" / "outputs").is_dir()
