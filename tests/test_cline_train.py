"""CLINE end to end with the real fairseq-train: continue a masked-LM RoBERTa with --task cline
--criterion cline (RTD head starts fresh), save, resume, then fine-tune with sentence_prediction
(the CLINE-only tensors are dropped), and Hits of the checkpoints."""

import re

import pytest
import torch
from command_runs import run_script
from corpus_fixtures import make_classification_data
from fairseq_runs import TINY_ROBERTA, fairseq_train, updates
from finetune_flags import sentence_prediction_args

from truneg_fairseq.text import TokenizerSpec

# the tiny RoBERTa of the other tests, as a cline_roberta_tiny (same sizes)
SIZES = TINY_ROBERTA[2:-2]
assert TINY_ROBERTA[-2] == "--tokens-per-sample"


@pytest.fixture(scope="module")
def cline_valid_data(corpus_dir, data_bin, wn, tmp_path_factory):
    """CLINE data of the corpus's valid lines (as train and valid split), read by the recipes."""
    from truneg_fairseq.data import cline_data as cline

    work = tmp_path_factory.mktemp("cline_valid")
    settings = cline.Settings(
        seed=1, tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    cline.make_cline_data(
        {"train": corpus_dir / "raw" / "valid.txt", "valid": corpus_dir / "raw" / "valid.txt"},
        work,
        settings,
        srcdict=data_bin / "dict.txt",
        wn=wn,
    )
    return work / "data-bin"


@pytest.mark.slow
def test_continue_resume_finetune_and_hits(corpus_dir, data_bin, tmp_path, wn):
    from truneg_fairseq.data import cline_data as cline

    work = tmp_path / "cline"
    settings = cline.Settings(
        seed=1, tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    cline.make_cline_data(
        {"train": corpus_dir / "raw" / "train.txt", "valid": corpus_dir / "raw" / "valid.txt"},
        work,
        settings,
        srcdict=data_bin / "dict.txt",
        wn=wn,
    )
    cdata = work / "data-bin"

    # a masked-LM RoBERTa to continue from (as fairseq's roberta.base would be)
    fairseq_train(
        data_bin, tmp_path / "mlm", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2"]
    )
    args = [
        "--task",
        "cline",
        "--criterion",
        "cline",
        "--arch",
        "cline_roberta_tiny",
        *SIZES,
        "--tokens-per-sample",
        "64",
        "--cline-learned-weights",
    ]
    first = fairseq_train(
        cdata,
        tmp_path / "ck",
        [
            *args,
            "--max-update",
            "4",
            "--restore-file",
            str(tmp_path / "mlm" / "checkpoint_last.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
        ],
    )
    log = first.stdout + first.stderr
    assert "the checkpoint has no CLINE RTD head" in log and "Loaded checkpoint" in log
    assert re.search(
        r"train_inner .*mlm_loss=.*rtd_loss=.*cts_loss=.*logvar_loss=.*rtd_acc=.*cts_acc=.*w_mlm=",
        log,
    )
    assert re.search(r"valid on 'valid' subset \| loss [\d.]+ \| mlm_loss [\d.]+ \| rtd_loss", log)
    assert updates(log) == 4
    state = torch.load(
        tmp_path / "ck" / "checkpoint_last.pt", map_location="cpu", weights_only=False
    )
    assert "rtd_head.dense.weight" in state["model"] and "cline_log_vars" in state["model"]

    second = fairseq_train(cdata, tmp_path / "ck", [*args, "--max-update", "6"])
    log2 = second.stdout + second.stderr
    assert "Loaded checkpoint" in log2 and "@ 4 updates" in log2 and updates(log2) == 6

    # fine-tune: the model is plain RoBERTa for sentence_prediction
    cls_data = make_classification_data(corpus_dir, tmp_path / "cls")
    ft = fairseq_train(
        cls_data,
        tmp_path / "ft",
        sentence_prediction_args(
            ["--arch", "cline_roberta_tiny", *SIZES],
            max_update=3,
            restore=tmp_path / "ck" / "checkpoint_last.pt",
        ),
    )
    log3 = ft.stdout + ft.stderr
    assert "dropped 7 CLINE pre-training tensors" in log3  # 6 RTD head tensors + the log-variances
    assert re.search(r"valid on 'valid' subset .*accuracy [\d.]+", log3)
    keys = torch.load(
        tmp_path / "ft" / "checkpoint_last.pt", map_location="cpu", weights_only=False
    )["model"].keys()
    assert not any(k.startswith(("rtd_head.", "cline_log_vars")) for k in keys)

    # Hits of the masked-LM start and the CLINE checkpoint, triplets made from sentences
    proc = run_script(
        "cline_hits.py",
        [
            str(tmp_path / "mlm" / "checkpoint_last.pt"),
            str(tmp_path / "ck" / "checkpoint_last.pt"),
            "--data",
            str(cdata),
            "--spm-model",
            str(corpus_dir / "spm.model"),
            "--sentences",
            str(corpus_dir / "raw" / "valid.txt"),
            "--save-triplets",
            str(tmp_path / "t.tsv"),
            "--json",
            str(tmp_path / "h.json"),
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("max ") == 2 and "bertscore" in proc.stdout
    assert len((tmp_path / "t.tsv").read_text().splitlines()) > 10
    bad = run_script(
        "cline_hits.py",
        [
            str(tmp_path / "ck" / "checkpoint_last.pt"),
            "--data",
            str(cdata),
            "--spm-model",
            str(corpus_dir / "spm.model"),
            "--triplets",
            str(corpus_dir / "raw" / "valid.txt"),
        ],
    )
    assert bad.returncode != 0 and "expected 3 tab-separated sentences" in bad.stderr


@pytest.mark.slow
def test_recipes_run(data_bin, cline_valid_data, tmp_path):
    """The fairseq-hydra-train config and the shell recipe, shrunk to a tiny model on the CPU."""
    from command_runs import run_recipe
    from fairseq_runs import hydra_train
    from repo_paths import REPO

    cdata = cline_valid_data

    fairseq_train(
        data_bin, tmp_path / "mlm", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    )
    p = hydra_train(
        REPO / "examples" / "cline" / "config",
        "roberta_base_cline",
        [
            f"task.data={cdata}",
            f"checkpoint.restore_file={tmp_path / 'mlm' / 'checkpoint_last.pt'}",
            f"checkpoint.save_dir={tmp_path / 'hy'}",
            "optimization.max_update=2",
            "optimization.update_freq=[1]",
            "dataset.batch_size=4",
            "task.tokens_per_sample=64",
            "model.max_positions=64",
            "model.encoder_layers=2",
            "model.encoder_embed_dim=32",
            "model.encoder_ffn_embed_dim=64",
            "model.encoder_attention_heads=2",
        ],
        tmp_path / "hyrun",
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "the checkpoint has no CLINE RTD head" in p.stdout + p.stderr
    assert (tmp_path / "hy" / "checkpoint_last.pt").is_file()
    r = run_recipe(
        "cline/pretrain.sh",
        [str(cdata), "none", *SIZES[:-2], "--cpu"],
        tmp_path,
        MAX_UPDATE="2",
        TOKENS="64",
        MAX_SENTENCES="4",
        UPDATE_FREQ="1",
        SAVE_DIR=str(tmp_path / "sh"),
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert updates(r.stdout + r.stderr) == 2 and "cts_loss" in r.stdout + r.stderr


@pytest.mark.slow
def test_cline_on_electra_end_to_end(corpus_dir, data_bin, cline_valid_data, tmp_path):
    """An ELECTRA pre-training checkpoint continued with CLINE through the shell recipe and the
    ELECTRA-base hydra config (shrunk), fine-tuned as a plain ELECTRA discriminator, and Hits of
    the CLINE checkpoint's discriminator."""
    from command_runs import run_recipe
    from fairseq_runs import TINY_ELECTRA, TINY_ELECTRA_MODEL, hydra_train
    from repo_paths import REPO

    cdata = cline_valid_data

    fairseq_train(
        data_bin,
        tmp_path / "el",
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "1"],
    )
    start = tmp_path / "el" / "checkpoint_last.pt"

    r = run_recipe(
        "cline/pretrain.sh",
        [str(cdata), str(start), "--electra-max-positions", "64", "--cpu", "--log-interval", "1"],
        tmp_path,
        ARCH="cline_electra_tiny",
        MAX_UPDATE="2",
        TOKENS="64",
        MAX_SENTENCES="4",
        UPDATE_FREQ="1",
        SAVE_DIR=str(tmp_path / "sh"),
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert "cline_log_vars start at zero" in log and "Loaded checkpoint" in log
    assert re.search(r"train_inner .*mlm_loss=.*rtd_loss=.*cts_loss=.*cts_acc=", log)
    assert updates(log) == 2
    ck = tmp_path / "sh" / "checkpoint_last.pt"
    keys = torch.load(ck, map_location="cpu", weights_only=False)["model"].keys()
    assert (
        "cline_log_vars" in keys
        and "generator_bias" in keys
        and not any(k.startswith("rtd_head.") for k in keys)
    )

    p = hydra_train(
        REPO / "examples" / "cline" / "config",
        "electra_base_cline",
        [
            f"task.data={cdata}",
            f"checkpoint.restore_file={start}",
            f"checkpoint.save_dir={tmp_path / 'hy'}",
            "optimization.max_update=1",
            "optimization.update_freq=[1]",
            "dataset.batch_size=4",
            "task.tokens_per_sample=64",
            "model._name=cline_electra_tiny",
            "model.electra_max_positions=64",
            "model.electra_layernorm_eps=1e-5",
        ],
        tmp_path / "hyrun",
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "cts_loss" in p.stdout + p.stderr and (tmp_path / "hy" / "checkpoint_last.pt").is_file()

    # fine-tuning: the discriminator alone, as a plain electra_* model
    cls_data = make_classification_data(corpus_dir, tmp_path / "cls")
    ft = fairseq_train(
        cls_data,
        tmp_path / "ft",
        sentence_prediction_args(TINY_ELECTRA_MODEL, max_update=2, restore=ck),
    )
    log3 = ft.stdout + ft.stderr
    assert (
        "dropped the CLINE task weights" in log3
        and "loading the discriminator only: dropped" in log3
    )
    assert re.search(r"valid on 'valid' subset .*accuracy [\d.]+", log3)

    proc = run_script(
        "cline_hits.py",
        [
            str(ck),
            "--data",
            str(cdata),
            "--spm-model",
            str(corpus_dir / "spm.model"),
            "--sentences",
            str(corpus_dir / "raw" / "valid.txt"),
            "--json",
            str(tmp_path / "h.json"),
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    res = json.loads((tmp_path / "h.json").read_text())["results"][str(ck)]
    assert len(res["cls"]) == 3 and all(0.0 <= v <= 100.0 for vs in res.values() for v in vs)
