"""The learning-rate schedule examples/glue/finetune.sh writes follows the updates the run makes:
counted from the task's train examples, the batch size, the workers and the run's hydra overrides
(epochs, an update limit, update_freq), with WARMUP's warm-up; what would part the schedule from
the run is refused with the setting to change. fairseq-hydra-train's own run directory stays
under the run's output."""

import json

import pytest
from omegaconf import OmegaConf
from repo_paths import REPO

from truneg_fairseq.pipelines.glue_run_config import GlueFinetuneError, write_run_config

RTE = REPO / "examples" / "glue" / "config" / "rte.yaml"  # 10 epochs


@pytest.fixture
def run(plain_checkpoint, tmp_path):
    data = tmp_path / "RTE"
    data.mkdir()
    (data / "meta.json").write_text(json.dumps({"examples": {"train": 100, "valid": 10}}))

    def write(*overrides, warmup=None, world_size=1, batch_size=8):
        out = tmp_path / "config" / "rte.yaml"
        summary = write_run_config(
            str(RTE),
            str(out),
            str(plain_checkpoint),
            str(data),
            str(tmp_path / "save"),
            str(REPO / "truneg_fairseq"),
            1e-4,
            batch_size,
            overrides=list(overrides),
            warmup=warmup,
            world_size=world_size,
        )
        cfg = OmegaConf.load(out)
        assert cfg.lr_scheduler.total_num_update == summary["updates"]
        assert cfg.lr_scheduler.warmup_updates == summary["warmup"]
        return summary["updates"], summary["warmup"], cfg

    return write


def test_the_schedule_counts_the_updates_of_the_run(run):
    # 100 examples in batches of 8: 13 batches per epoch (the last one smaller)
    assert run()[:2] == (130, 13)  # the recipe's 10 epochs, 10% warm-up
    assert run("optimization.max_epoch=2")[:2] == (26, 2)
    assert run("optimization.max_epoch=2", "optimization.update_freq=[4]")[:2] == (8, 0)
    assert run("optimization.max_epoch=3", "optimization.update_freq=[4,1]")[:2] == (30, 3)
    assert run("optimization.max_update=5")[:2] == (5, 0)
    assert run("optimization.max_epoch=2", world_size=2)[:2] == (14, 1)
    assert run("optimization.max_epoch=2", "dataset.batch_size=50")[:2] == (4, 0)
    assert run("optimization.max_epoch=2", batch_size=32)[:2] == (8, 0)
    assert run("optimization.max_epoch=2", "model.dropout=0.2", "common.cpu=true")[:2] == (26, 2)


def test_warmup_is_taken_and_checked(run):
    assert run("optimization.max_epoch=2", warmup=5)[:2] == (26, 5)
    assert run("optimization.max_epoch=2", warmup=0)[:2] == (26, 0)
    with pytest.raises(GlueFinetuneError, match=r"WARMUP=26: .*makes 26 updates.*between 0 and 25"):
        run("optimization.max_epoch=2", warmup=26)


@pytest.mark.parametrize(
    "override,says",
    [
        ("lr_scheduler.total_num_update=100", "optimization.max_epoch=N"),
        ("lr_scheduler.warmup_updates=3", "WARMUP=N"),
        ("dataset.max_tokens=512", "give BSZ"),
        ("optimization.max_epoch=0", "the run has no end"),
    ],
)
def test_what_would_part_the_schedule_from_the_run_is_refused(run, override, says):
    with pytest.raises(GlueFinetuneError, match=says):
        run(override)


def test_hydra_keeps_its_files_under_the_run_and_the_working_directory(run, tmp_path):
    cfg = run()[2]
    assert cfg.hydra.run.dir == str(tmp_path / "save" / "hydra")
    assert cfg.hydra.job.chdir is False
