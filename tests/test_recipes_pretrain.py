"""The pre-training recipes through their real command lines on tiny, non-base models, with no
size flag: the sizes come from the checkpoint (MLM ``RESTORE=``, ELECTRA's checkpoint argument)
or from the import record (CLINE on an imported 40-position BERT); paths with spaces, commas,
quotes and non-ASCII characters work, a data path with ':' is refused with the reason."""

import re
import shutil

import pytest
import torch
from command_runs import run_recipe
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, fairseq_train, updates

ODD_NAME = "runs, 'v1' \"q\" über"
SMALL = dict(MAX_UPDATE="2", MAX_SENTENCES="4", UPDATE_FREQ="1")


def saved_cfg(path):
    """The checkpoint's config as plain dicts (a RoBERTa/BERT model's section is a Namespace)."""
    cfg = torch.load(path, map_location="cpu", weights_only=False)["cfg"]
    return {k: v if isinstance(v, dict) or v is None else vars(v) for k, v in cfg.items()}


@pytest.mark.slow
def test_mlm_recipe_continues_a_checkpoint_with_its_sizes(data_bin, synonym_table, tmp_path):
    """RESTORE= a 2 x 32 RoBERTa with 64 positions: no size flag, SEQ = 64, the valid split's
    over-long sentences skipped, everything in a directory with an odd name; the warm-up
    follows MAX_UPDATE; the baseline is given the table and logs the ratios."""
    work = tmp_path / ODD_NAME
    data = shutil.copytree(data_bin, work / "data-bin")
    fairseq_train(
        data, work / "start", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    )
    r = run_recipe(
        "mlm/pretrain.sh",
        [str(data), "mlm_plain", "--cpu", "--log-interval", "1"],
        work,
        RESTORE=str(work / "start" / "checkpoint_last.pt"),
        SAVE_DIR=str(work / "ck"),
        **SMALL,
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert updates(log) == 2 and "Loaded checkpoint" in log
    assert re.search(r"train_inner .*pred_corr_ratio=.*iter_corr_ratio=", log)
    cfg = saved_cfg(work / "ck" / "checkpoint_last.pt")
    assert (cfg["model"]["encoder_layers"], cfg["model"]["encoder_embed_dim"]) == (2, 32)
    assert cfg["model"]["max_positions"] == 64 and cfg["task"]["tokens_per_sample"] == 64
    assert cfg["dataset"]["skip_invalid_size_inputs_valid_test"] is True
    # WARMUP's default, 6% of MAX_UPDATE: none in 2 updates (a fixed 10000 kept lr near 0)
    assert cfg["lr_scheduler"]["warmup_updates"] == 0


@pytest.mark.parametrize(
    "recipe,args",
    [
        ("mlm/pretrain.sh", ["masked_lm"]),
        ("electra/pretrain.sh", ["small", "{data}", "electra"]),
        ("cline/pretrain.sh", ["none"]),
    ],
)
def test_a_data_path_with_a_colon_is_refused(recipe, args, tmp_path):
    data = tmp_path / "a:b"
    data.mkdir()
    argv = (
        [a.replace("{data}", str(data)) for a in args] if "{data}" in args else [str(data), *args]
    )
    r = run_recipe(recipe, argv, tmp_path)
    assert r.returncode == 2
    assert "holds ':', which fairseq reads as a separator" in r.stderr, r.stderr[-2000:]


@pytest.mark.slow
def test_electra_recipe_continues_a_checkpoint_of_any_size(data_bin, synonym_table, tmp_path):
    """electra/pretrain.sh CHECKPOINT: a 2-layer ELECTRA (16/32 wide, 64 positions) continued
    with the baseline; the arch and every size read from the checkpoint, the synonym table given
    (the ratios in the log)."""
    work = tmp_path / ODD_NAME
    fairseq_train(
        data_bin, work / "start", [*TINY_ELECTRA, "--task", "electra", "--max-update", "1"]
    )
    r = run_recipe(
        "electra/pretrain.sh",
        [
            str(work / "start" / "checkpoint_last.pt"),
            str(data_bin),
            "electra",
            "--cpu",
            "--log-interval",
            "1",
        ],
        work,
        PRECISION="fp32",
        SAVE_DIR=str(work / "ck"),
        **SMALL,
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert updates(log) == 2
    assert re.search(r"train_inner .*disc_loss=.*pred_corr_ratio=.*iter_corr_ratio=", log)
    model = saved_cfg(work / "ck" / "checkpoint_last.pt")["model"]
    assert model["_name"] == "electra_small"
    sizes = [model[k] for k in ("electra_layers", "electra_hidden_dim", "electra_gen_hidden_dim")]
    assert sizes == [2, 32, 16] and model["electra_max_positions"] == 64


@pytest.mark.slow
def test_cline_recipe_on_an_imported_bert_of_40_positions(corpus_dir, wn, tmp_path):
    """cline/pretrain.sh DATA IMPORTED_DIR with ARCH=cline_bert_hf_base: the import's sizes
    (2 x 32, 40 positions) and its LayerNorm epsilon, TOKENS = 40, no size flag."""
    from hf_fixtures import bert_config, wordpiece_vocab, write_vocab
    from transformers import BertForMaskedLM

    from truneg_fairseq.convert import hf as hf_convert
    from truneg_fairseq.data import cline_data as cline
    from truneg_fairseq.text import TokenizerSpec

    vocab = wordpiece_vocab()
    torch.manual_seed(0)
    BertForMaskedLM(bert_config(len(vocab), max_position_embeddings=40)).save_pretrained(
        str(tmp_path / "hf")
    )
    write_vocab(tmp_path / "hf", vocab)
    imported = hf_convert.import_hf(tmp_path / "hf", tmp_path / "imported")
    raw = corpus_dir / "raw" / "valid.txt"
    settings = cline.Settings(
        seed=1, tokenizer=TokenizerSpec("wordpiece", vocab=str(imported / "vocab.txt"))
    )
    cline.make_cline_data(
        {"train": raw, "valid": raw},
        tmp_path / "cline",
        settings,
        srcdict=imported / "dict.txt",
        wn=wn,
    )
    r = run_recipe(
        "cline/pretrain.sh",
        [
            str(tmp_path / "cline" / "data-bin"),
            str(imported),
            "--cpu",
            "--log-interval",
            "1",
            "--skip-invalid-size-inputs-valid-test",
        ],
        tmp_path,
        ARCH="cline_bert_hf_base",
        SAVE_DIR=str(tmp_path / "ck"),
        **SMALL,
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert updates(log) == 2 and "cts_loss" in log
    cfg = saved_cfg(tmp_path / "ck" / "checkpoint_last.pt")
    assert cfg["model"]["max_positions"] == 40 and cfg["task"]["tokens_per_sample"] == 40
    assert cfg["model"]["encoder_embed_dim"] == 32 and cfg["model"]["bert_layernorm_eps"] == 1e-12


@pytest.mark.parametrize(
    "recipe,args,compile_,said",
    [
        ("mlm/pretrain.sh", ["masked_lm"], "model", "masked_lm trains eager: leave COMPILE unset"),
        ("mlm/pretrain.sh", ["mlm_hard_correction"], "graphs", "COMPILE must be 0, model"),
    ],
)
def test_a_compile_setting_the_recipe_cannot_take_is_refused(
    recipe, args, compile_, said, data_bin, tmp_path
):
    """COMPILE (examples/compile.sh): fairseq's masked_lm is not compiled, and a value other
    than 0, model or update is named; both before fairseq-train starts."""
    r = run_recipe(recipe, [str(data_bin), *args], tmp_path, COMPILE=compile_)
    assert r.returncode == 2
    assert said in r.stderr and "fairseq-train" not in r.stderr, r.stderr[-2000:]
