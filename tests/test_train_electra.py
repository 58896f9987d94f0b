"""End-to-end ELECTRA with the real fairseq-train: pre-training with each criterion, resume,
and fine-tuning the discriminator with fairseq's sentence_prediction."""

import re

import pytest
from corpus_fixtures import make_classification_data
from fairseq_runs import TINY_ELECTRA, TINY_ELECTRA_MODEL, TINY_ROBERTA, fairseq_train, updates
from finetune_flags import sentence_prediction_args
from objective_cases import electra_criteria

CRITERIA = electra_criteria()


def electra_train(data_bin, save, criterion, n, extra=()):
    return fairseq_train(
        data_bin,
        save,
        [
            *TINY_ELECTRA,
            "--task",
            "electra",
            "--criterion",
            criterion,
            "--synonym-table",
            "synonyms.npz",
            "--max-update",
            str(n),
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def pretrained(data_bin, synonym_table, tmp_path_factory):
    save = tmp_path_factory.mktemp("electra_pre") / "ckpt"
    electra_train(data_bin, save, "mlm_hard_correction", 4)
    return save / "checkpoint_last.pt"


@pytest.mark.slow
@pytest.mark.parametrize("criterion", CRITERIA)
def test_electra_pretrain_and_resume(data_bin, synonym_table, tmp_path, criterion):
    save = tmp_path / "ckpt"
    out = electra_train(data_bin, save, criterion, 4, ["--electra-rtd-synonym-policy", "ignore"])
    log = out.stdout + out.stderr
    for key in (
        "mlm_loss=",
        "disc_loss=",
        "disc_acc=",
        "replaced=",
        "rtd_precision=",
        "rtd_recall=",
        "rtd_synonym=",
        "pred_corr_ratio=",
    ):
        assert key in log, key
    assert updates(log) == 4
    again = electra_train(data_bin, save, criterion, 6, ["--electra-rtd-synonym-policy", "ignore"])
    log2 = again.stdout + again.stderr
    assert "Loaded checkpoint" in log2 and "@ 4 updates" in log2
    assert updates(log2) == 6


def finetune(data, save, restore, check=True):
    cmd_args = sentence_prediction_args(
        TINY_ELECTRA_MODEL, max_update=6, restore=restore, best_accuracy=True
    )
    # fairseq_train's defaults set --task masked_lm first; argparse keeps the last --task
    return fairseq_train(data, save, cmd_args, check=check)


@pytest.mark.slow
def test_finetune_discriminator_with_sentence_prediction(corpus_dir, pretrained, tmp_path):
    data = make_classification_data(corpus_dir, tmp_path / "cls")
    out = finetune(data, tmp_path / "ft", pretrained)
    log = out.stdout + out.stderr
    assert "loading the discriminator only: dropped" in log
    assert "Loaded checkpoint" in log
    assert re.search(r"valid on 'valid' subset .*accuracy [\d.]+", log)
    assert updates(log) == 6
    import torch

    state = torch.load(
        tmp_path / "ft" / "checkpoint_last.pt", map_location="cpu", weights_only=False
    )
    keys = state["model"].keys()
    assert not any(k.startswith(("generator.", "generator_head.", "generator_bias")) for k in keys)
    assert any(k.startswith("classification_heads.sentence_classification_head.") for k in keys)


@pytest.mark.slow
def test_finetune_from_non_electra_checkpoint_fails_clearly(data_bin, corpus_dir, tmp_path):
    fairseq_train(
        data_bin, tmp_path / "rob", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    )
    data = make_classification_data(corpus_dir, tmp_path / "cls")
    out = finetune(data, tmp_path / "ft", tmp_path / "rob" / "checkpoint_last.pt", check=False)
    assert out.returncode != 0
    assert "not an ELECTRA checkpoint" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("config", ["small_scratch", "small_scratch_hc", "small_scratch_sentkl"])
def test_electra_hydra_configs_train(data_bin, synonym_table, tmp_path, config):
    """examples/electra/config recipes with fairseq-hydra-train, shrunk to a tiny model."""
    from fairseq_runs import hydra_train
    from repo_paths import REPO

    overrides = [
        f"task.data={data_bin}",
        "model.electra_layers=2",
        "model.electra_gen_layers=2",
        "model.electra_embed_dim=16",
        "model.electra_hidden_dim=32",
        "model.electra_heads=2",
        "model.electra_ffn_dim=64",
        "model.electra_gen_hidden_dim=16",
        "model.electra_gen_heads=1",
        "model.electra_gen_ffn_dim=32",
        "model.electra_max_positions=64",
        "task.tokens_per_sample=64",
        "optimization.max_update=2",
        "dataset.batch_size=4",
        f"checkpoint.save_dir={tmp_path / 'ck'}",
        f"common.tensorboard_logdir={tmp_path / 'tb'}",
    ]
    overrides.append(f"criterion.synonym_table={synonym_table}")
    proc = hydra_train(
        REPO / "examples" / "electra" / "config", config, overrides, tmp_path / "run"
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert (tmp_path / "ck" / "checkpoint_last.pt").is_file()
    assert "disc_loss=" in out and "rtd_precision=" in out and "num_updates=2" in out
    assert "pred_corr_ratio=" in out and "iter_corr_ratio=" in out  # the baseline's too
    if config.endswith("sentkl"):
        assert "kl_loss=" in out


@pytest.mark.slow
def test_shell_recipes_pretrain_then_finetune(data_bin, synonym_table, corpus_dir, tmp_path):
    """examples/electra/pretrain.sh (small, ELECTRA^HC) then finetune_glue.sh, shrunk and in fp32."""
    from command_runs import run_recipe

    pre = run_recipe(
        "electra/pretrain.sh",
        [
            "small",
            str(data_bin),
            "mlm_hard_correction",
            "--cpu",
            *TINY_ELECTRA,
            "--max-update",
            "2",
            "--log-interval",
            "1",
        ],
        tmp_path,
        SAVE_DIR=str(tmp_path / "pre"),
        MAX_SENTENCES="4",
    )
    assert pre.returncode == 0, pre.stderr[-3000:]
    assert (tmp_path / "pre" / "checkpoint_last.pt").is_file()
    data = make_classification_data(corpus_dir, tmp_path / "cls")
    ft = run_recipe(
        "electra/finetune_glue.sh",
        [
            "small",
            str(data),
            str(tmp_path / "pre" / "checkpoint_last.pt"),
            "2",
            "--cpu",
            *TINY_ELECTRA_MODEL,
            "--max-positions",
            "64",
            "--max-update",
            "3",
        ],
        tmp_path,
        SAVE_DIR=str(tmp_path / "ft"),
    )
    assert ft.returncode == 0, ft.stderr[-3000:]
    assert "dropped" in ft.stdout + ft.stderr and re.search(
        r"accuracy [\d.]+", ft.stdout + ft.stderr
    )
