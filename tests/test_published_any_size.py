"""A published encoder of an unusual size without a masked-LM head, the way most sentence-
embedding BERTs are published (safetensors + tokenizer.json, no vocab.txt, a pooler, no
``cls.*``): import (seeded head, pooler kept, sizes recorded), head warm-up with the encoder
frozen, continued HC through the recipe with no size flags, export and reload in transformers
(pooler, ``model_max_length``, truncation of a long input, file modes)."""

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
import torch
from command_runs import run_recipe, run_script
from corpus_fixtures import tiny_corpus_lines
from fairseq_runs import fairseq_train, model_state
from hf_fixtures import _randomize, bert_config, wordpiece_vocab

from truneg_fairseq.convert import hf as hf_convert

# 3 layers x 48, 3 heads, FFN 80, 40 positions: no arch of the plugin has these sizes
ODD = dict(
    hidden_size=48,
    num_hidden_layers=3,
    num_attention_heads=3,
    intermediate_size=80,
    max_position_embeddings=40,
)


def save_headless_bert(hf_dir: Path, vocab):
    """transformers' BertModel (no MLM head, with its pooler), safetensors, and the tokenizer as
    tokenizer.json only."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertModel

    torch.manual_seed(0)
    model = BertModel(bert_config(len(vocab), **ODD)).eval()
    _randomize(model, 0)
    model.save_pretrained(str(hf_dir), safe_serialization=True)
    (hf_dir / "vocab.txt").write_text("".join(t + "\n" for t in vocab))
    BertWordPieceTokenizer(str(hf_dir / "vocab.txt"), lowercase=True).save(
        str(hf_dir / "tokenizer.json")
    )
    (hf_dir / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True})
    )
    (hf_dir / "vocab.txt").unlink()  # published sentence encoders often ship tokenizer.json alone
    assert not (hf_dir / "pytorch_model.bin").exists() and (hf_dir / "tokenizer.json").is_file()
    return model


@pytest.fixture(scope="module")
def published(tmp_path_factory, wn):
    from tokenizers import BertWordPieceTokenizer

    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.lexicon import build_table, vocab_view

    root = tmp_path_factory.mktemp("published")
    vocab = wordpiece_vocab()
    hf = save_headless_bert(root / "hf", vocab)
    imported = hf_convert.import_hf(root / "hf", root / "imported")
    tok = BertWordPieceTokenizer(str(imported / "vocab.txt"), lowercase=True)
    lines = tiny_corpus_lines(400, seed=5)
    long_line = " ".join(lines[:12])  # longer than the model's 40 positions
    train_lines = lines[:360] + [long_line] * 3
    (root / "tok").mkdir()
    for name, part in (("train", train_lines), ("valid", lines[360:] + [long_line])):
        (root / "tok" / f"{name}.txt").write_text(
            "".join(
                " ".join(tok.encode(line, add_special_tokens=False).tokens) + "\n" for line in part
            )
        )
    data_bin = corpus_steps.binarize(
        root / "tok" / "train.txt",
        root / "tok" / "valid.txt",
        root / "data-bin",
        srcdict=imported / "dict.txt",
    )
    table, _ = build_table(vocab_view(data_bin / "dict.txt", "whitespace"), source="wordnet", wn=wn)
    table.save(data_bin / "synonyms.npz")
    return {"root": root, "hf": hf, "imported": imported, "data_bin": data_bin, "vocab": vocab}


def test_import_records_sizes_seeds_the_head_and_keeps_the_pooler(published, tmp_path):
    imported, hf = published["imported"], published["hf"]
    info = json.loads((imported / "import.json").read_text())
    assert info["fairseq_arch"] == "bert_hf" and info["mlm_head"] == "fresh (seed 1)"
    sizes = info["model_args"]
    assert (
        sizes["encoder_layers"],
        sizes["encoder_embed_dim"],
        sizes["encoder_ffn_embed_dim"],
        sizes["encoder_attention_heads"],
        sizes["max_positions"],
    ) == (3, 48, 80, 3, 40)
    first = model_state(imported / "model.pt")
    assert torch.equal(first["bert_pooler_weight"], hf.pooler.dense.weight)
    assert torch.equal(first["bert_pooler_bias"], hf.pooler.dense.bias)
    # the fresh head: BertLMPredictionHead's initialisation, from the seed alone
    w = first["encoder.lm_head.dense.weight"]
    assert abs(w.std().item() - 0.02) < 0.004 and first["encoder.lm_head.bias"].abs().max() == 0
    assert torch.equal(first["encoder.lm_head.layer_norm.weight"], torch.ones(48))
    again = model_state(
        hf_convert.import_hf(published["root"] / "hf", tmp_path / "again") / "model.pt"
    )
    for k in first:
        assert torch.equal(first[k], again[k]), k  # two imports: the same model, head included
    other = model_state(
        hf_convert.import_hf(published["root"] / "hf", tmp_path / "seed2", seed=2) / "model.pt"
    )
    assert not torch.equal(other["encoder.lm_head.dense.weight"], w)


def test_sizes_from_the_import_directory_and_clear_errors(published, tmp_path):
    from truneg_fairseq.models import import_sizes

    args = import_sizes.read_model_args(str(published["imported"]), "--bert-sizes-from")
    assert args["encoder_layers"] == 3 and args["bert_layernorm_eps"] == 1e-12
    with pytest.raises(import_sizes.ImportSizesError, match="convert_hf.py import"):
        import_sizes.read_model_args(str(tmp_path), "--bert-sizes-from")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "import.json").write_text(
        json.dumps({"model_args": {"encoder_layers": "__import__('os')"}})
    )
    with pytest.raises(import_sizes.ImportSizesError, match="encoder_layers"):
        import_sizes.read_model_args(str(bad), "--bert-sizes-from")
    out = fairseq_train(
        published["data_bin"],
        tmp_path / "ck",
        ["--arch", "bert_hf", "--bert-sizes-from", str(bad), "--max-update", "1"],
        check=False,
    )
    assert out.returncode != 0 and "encoder_layers" in out.stdout + out.stderr


@pytest.mark.slow
def test_head_warmup_changes_only_the_head(published, tmp_path):
    imported = published["imported"]
    save = tmp_path / "warm"
    out = fairseq_train(
        published["data_bin"],
        save,
        [
            "--arch",
            "bert_hf",
            "--bert-sizes-from",
            str(imported),
            "--bert-freeze-encoder",
            "--criterion",
            "masked_lm",
            "--tokens-per-sample",
            "40",
            "--skip-invalid-size-inputs-valid-test",
            "--max-update",
            "4",
            "--lr",
            "1e-3",
            "--restore-file",
            str(imported / "model.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
            "--disable-validation",
        ],
    )
    log = out.stdout + out.stderr
    assert "--bert-freeze-encoder" in log and "num_updates=4" in log
    before, after = model_state(imported / "model.pt"), model_state(save / "checkpoint_last.pt")
    head = ("encoder.lm_head.dense.", "encoder.lm_head.layer_norm.", "encoder.lm_head.bias")
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed and all(k.startswith(head) for k in changed), changed
    assert "encoder.lm_head.dense.weight" in changed
    # the body (the tied output projection with it) kept every bit
    assert torch.equal(
        before["encoder.sentence_encoder.embed_tokens.weight"], after["encoder.lm_head.weight"]
    )
    cfg = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)["cfg"][
        "model"
    ]
    assert (
        cfg.encoder_layers == 3 and cfg.bert_sizes_from is None
    )  # the checkpoint holds the sizes itself


RECIPE_TINY = [
    "--max-update",
    "3",
    "--batch-size",
    "4",
    "--update-freq",
    "1",
    "--warmup-updates",
    "1",
    "--cpu",
    "--log-interval",
    "1",
]


@pytest.fixture(scope="module")
def recipe_hc(published, tmp_path_factory):
    """examples/bert/pretrain.sh on the import: the head warmed up for 4 updates (HEAD_DIR), then
    HC continued from it (SAVE_DIR), with an HC-only flag the warm-up (masked_lm) must not get."""
    root = tmp_path_factory.mktemp("recipe_hc")
    env = dict(SAVE_DIR=str(root / "hc"), HEAD_DIR=str(root / "head"), HEAD_UPDATES="4")
    out = run_recipe(
        "bert/pretrain.sh",
        [
            str(published["imported"]),
            str(published["data_bin"]),
            "mlm_hard_correction",
            *RECIPE_TINY,
            "--mlm-prediction-slots",
            "dynamic",
        ],
        root,
        **env,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    return {"root": root, "log": log, "env": env}


@pytest.mark.slow
def test_recipe_warms_up_then_continues_with_hc(recipe_hc):
    log, root = recipe_hc["log"], recipe_hc["root"]
    assert "warming it up for 4 updates" in log and "invalid sizes and will be skipped" in log
    assert re.search(r"Loaded checkpoint .*head/checkpoint_1_4\.pt", log)
    assert (root / "head" / "checkpoint_last.pt").is_file() and (
        root / "hc" / "checkpoint_last.pt"
    ).is_file()


@pytest.mark.slow
def test_recipe_reuses_a_finished_warm_up_and_reruns_an_unfinished_one(
    published, recipe_hc, tmp_path
):
    imported, data_bin = published["imported"], published["data_bin"]
    shutil.copytree(recipe_hc["root"] / "head", tmp_path / "head")  # this test changes it
    # a second criterion, the baseline, reuses the same warmed-up head and logs the ratios too
    env = dict(recipe_hc["env"], SAVE_DIR=str(tmp_path / "mlm"), HEAD_DIR=str(tmp_path / "head"))
    again = run_recipe(
        "bert/pretrain.sh",
        [str(imported), str(data_bin), "mlm_plain", *RECIPE_TINY],
        tmp_path,
        **env,
    )
    assert again.returncode == 0 and re.search(
        r"is complete \(checkpoint_1_4.pt\) and was made by\s+this warm-up's command", again.stderr
    ), (again.stdout + again.stderr)[-3000:]
    assert re.search(r"train_inner .*pred_corr_ratio=.*iter_corr_ratio=", again.stdout)
    # a warm-up that did not reach its last update is run again, not continued from; SR's flag
    # reaches SR only
    (tmp_path / "head" / "checkpoint_1_4.pt").unlink()
    env["SAVE_DIR"] = str(tmp_path / "sr")
    sr = run_recipe(
        "bert/pretrain.sh",
        [str(imported), str(data_bin), "mlm_soft_reg", *RECIPE_TINY, "--synonym-sr-weight", "0.5"],
        tmp_path,
        **env,
    )
    assert sr.returncode == 0, (sr.stdout + sr.stderr)[-3000:]
    assert (
        "holds an unfinished warm-up" in sr.stderr
        and (tmp_path / "head" / "checkpoint_1_4.pt").is_file()
    )
    assert (tmp_path / "sr" / "checkpoint_last.pt").is_file()
    old = run_recipe(
        "bert/pretrain.sh", ["base", str(imported), str(data_bin), "masked_lm"], tmp_path
    )
    assert old.returncode == 2 and "import directory first" in old.stderr


@pytest.mark.slow
def test_a_finished_warm_up_made_otherwise_is_refused_not_taken_by_its_name(
    published, recipe_hc, tmp_path
):
    """The warm-up folder of the fixture asked for a warm-up of another learning rate, or on
    other data: one error saying what differs, nothing trained."""
    imported, data_bin = published["imported"], published["data_bin"]
    env = dict(recipe_hc["env"], HEAD_DIR=str(recipe_hc["root"] / "head"))
    other_data = shutil.copytree(data_bin, tmp_path / "other-data")
    with open(other_data / "valid.idx", "ab") as f:
        f.write(b"\0")  # another valid split, the same size of dictionary
    for change, env2, said in (
        ("lr", dict(env, HEAD_LR="5e-4"), "1e-3 -> 5e-4"),
        ("data", dict(env), "valid.idx"),
    ):
        data = other_data if change == "data" else data_bin
        r = run_recipe("bert/pretrain.sh", [str(imported), str(data), "mlm_plain", *RECIPE_TINY],
                       tmp_path, **dict(env2, SAVE_DIR=str(tmp_path / f"mlm-{change}")))  # fmt: skip
        assert r.returncode == 1 and "holds a finished warm-up that is not this one" in r.stderr
        assert said in r.stderr and "Remove" in r.stderr, r.stderr[-2000:]
        assert not (tmp_path / f"mlm-{change}").exists()


@pytest.mark.slow
def test_export_of_the_recipes_checkpoint_reloads_in_transformers(published, recipe_hc, tmp_path):
    from transformers import AutoModel, AutoTokenizer, BertForMaskedLM, pipeline

    imported = published["imported"]
    hf_out = tmp_path / "hf_out"
    exp = run_script(
        "convert_hf.py",
        [
            "export",
            str(recipe_hc["root"] / "hc" / "checkpoint_last.pt"),
            str(hf_out),
            "--vocab",
            str(imported / "vocab.txt"),
        ],
    )
    assert exp.returncode == 0, exp.stderr
    umask = os.umask(0)
    os.umask(umask)
    for f in hf_out.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~umask, f
    body = AutoModel.from_pretrained(str(hf_out))
    src = published["hf"]
    assert torch.equal(body.pooler.dense.weight, src.pooler.dense.weight)
    assert body.config.num_hidden_layers == 3 and body.config.hidden_size == 48
    tok = AutoTokenizer.from_pretrained(str(hf_out))
    assert tok.model_max_length == 40
    long_text = " ".join(tiny_corpus_lines(30, seed=1))
    assert len(tok(long_text)["input_ids"]) > 40
    assert len(tok(long_text, truncation=True)["input_ids"]) == 40
    fill = pipeline(
        "fill-mask", model=BertForMaskedLM.from_pretrained(str(hf_out)), tokenizer=tok, device=-1
    )
    assert len(fill("the [MASK] reason " + long_text, tokenizer_kwargs={"truncation": True})) == 5


@pytest.mark.slow
def test_hydra_configs_warm_up_and_continue_with_sizes_from_the_import(published, tmp_path):
    from fairseq_runs import hydra_train
    from repo_paths import REPO

    imported, data_bin = published["imported"], published["data_bin"]
    config = REPO / "examples" / "bert" / "config"
    common = [
        f"task.data={data_bin}",
        f"model.bert_sizes_from={imported}",
        "task.tokens_per_sample=40",
        "dataset.batch_size=4",
        "optimization.update_freq=[1]",
        "dataset.validate_interval_updates=0",
        "dataset.disable_validation=true",
    ]
    warm = hydra_train(
        config,
        "head_warmup",
        [
            *common,
            f"checkpoint.restore_file={imported / 'model.pt'}",
            f"checkpoint.save_dir={tmp_path / 'head'}",
            "optimization.max_update=2",
            "lr_scheduler.total_num_update=2",
        ],
        tmp_path / "run1",
    )
    assert warm.returncode == 0, (warm.stdout + warm.stderr)[-3000:]
    before, after = (
        model_state(imported / "model.pt"),
        model_state(tmp_path / "head" / "checkpoint_last.pt"),
    )
    assert torch.equal(
        before["encoder.sentence_encoder.layers.2.fc1.weight"],
        after["encoder.sentence_encoder.layers.2.fc1.weight"],
    )
    assert not torch.equal(
        before["encoder.lm_head.dense.weight"], after["encoder.lm_head.dense.weight"]
    )
    hc = hydra_train(
        config,
        "base_continue_hc",
        [
            *common,
            f"checkpoint.restore_file={tmp_path / 'head' / 'checkpoint_last.pt'}",
            f"checkpoint.save_dir={tmp_path / 'hc'}",
            f"criterion.synonym_table={data_bin / 'synonyms.npz'}",
            "optimization.max_update=2",
            "lr_scheduler.total_num_update=2",
        ],
        tmp_path / "run2",
    )
    assert hc.returncode == 0, (hc.stdout + hc.stderr)[-3000:]
    cont = model_state(tmp_path / "hc" / "checkpoint_last.pt")
    assert not torch.equal(
        after["encoder.sentence_encoder.layers.2.fc1.weight"],
        cont["encoder.sentence_encoder.layers.2.fc1.weight"],
    )


@pytest.mark.slow
def test_electra_pair_continues_with_sizes_and_epsilon_from_the_import(published, tmp_path):
    """A 2 x 32 ELECTRA pair (16-d embeddings, 16-wide generator): no size flag and no
    --electra-layernorm-eps; a model built with the defaults instead is refused on restore."""
    from hf_fixtures import save_electra_pair

    save_electra_pair(tmp_path / "disc", tmp_path / "gen", vocab=published["vocab"])
    imported = hf_convert.import_hf(
        tmp_path / "disc", tmp_path / "electra", generator_dir=tmp_path / "gen"
    )
    sizes = json.loads((imported / "import.json").read_text())["model_args"]
    assert sizes["electra_hidden_dim"] == 32 and sizes["electra_gen_hidden_dim"] == 16
    common = [
        "--task",
        "electra",
        "--arch",
        "electra_base",
        "--criterion",
        "mlm_hard_correction",
        "--synonym-table",
        str(published["data_bin"] / "synonyms.npz"),
        "--tokens-per-sample",
        "64",
        "--sample-break-mode",
        "none",
        "--max-update",
        "2",
        "--disable-validation",
        "--restore-file",
        str(imported / "model.pt"),
        "--reset-optimizer",
        "--reset-dataloader",
        "--reset-meters",
        "--reset-lr-scheduler",
    ]
    out = fairseq_train(
        published["data_bin"], tmp_path / "ck", [*common, "--electra-sizes-from", str(imported)]
    )
    assert "num_updates=2" in out.stdout + out.stderr
    cfg = torch.load(
        tmp_path / "ck" / "checkpoint_last.pt", map_location="cpu", weights_only=False
    )["cfg"]["model"]
    assert (
        cfg["electra_layers"] == 2
        and cfg["electra_layernorm_eps"] == 1e-12
        and cfg["electra_sizes_from"] is None
    )
    plain = fairseq_train(published["data_bin"], tmp_path / "ck2", common, check=False)
    assert plain.returncode != 0  # electra_base's 12 x 768 cannot take the 2 x 32 weights
    rec = run_recipe(
        "electra/pretrain.sh",
        [
            str(imported),
            str(published["data_bin"]),
            "mlm_hard_correction",
            "--cpu",
            "--max-update",
            "2",
            "--log-interval",
            "1",
            "--disable-validation",
        ],
        tmp_path,
        SAVE_DIR=str(tmp_path / "recipe"),
        MAX_SENTENCES="4",
        UPDATE_FREQ="1",
        PRECISION="fp32",
    )
    assert rec.returncode == 0, (rec.stdout + rec.stderr)[-3000:]
    assert re.search(r"Loaded checkpoint .*electra/model\.pt", rec.stdout + rec.stderr)
    cfg = torch.load(
        tmp_path / "recipe" / "checkpoint_last.pt", map_location="cpu", weights_only=False
    )["cfg"]
    assert (
        cfg["model"]["electra_hidden_dim"] == 32 and cfg["task"]["tokens_per_sample"] == 64
    )  # the pair's 64 positions


@pytest.mark.slow
def test_evaluate_the_odd_sized_model_on_over_long_lines(published, tmp_path):
    """evaluate_mlm.py on the 40-position model trained on whole sentences (as the recipe
    trains): --data skips (and counts) or breaks the over-long blocks; --text on the import
    directory (it stands for its model.pt) cuts the lines and reports the MLM loss."""
    imported, data_bin = published["imported"], published["data_bin"]
    table = str(data_bin / "synonyms.npz")
    fairseq_train(
        data_bin,
        tmp_path / "ck",
        [
            "--arch",
            "bert_hf",
            "--bert-sizes-from",
            str(imported),
            "--restore-file",
            str(imported / "model.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
            "--bert-freeze-encoder",
            "--tokens-per-sample",
            "40",
            "--sample-break-mode",
            "complete",
            "--skip-invalid-size-inputs-valid-test",
            "--max-update",
            "1",
            "--disable-validation",
        ],
    )
    ck = str(tmp_path / "ck" / "checkpoint_last.pt")
    skip = run_script(
        "evaluate_mlm.py", ["--data", str(data_bin), "--synonym-table", table, "--json", ck]
    )
    assert skip.returncode == 0, skip.stderr[-2000:]
    assert re.search(r"left out 1 of \d+ blocks longer than 40 tokens", skip.stdout + skip.stderr)
    res = json.loads(skip.stdout.strip().splitlines()[-1])
    assert res["mlm_loss"] > 0 and "pred_corr_ratio" in res
    broken = run_script(
        "evaluate_mlm.py", ["--data", str(data_bin), "--long-lines", "break", "--json", ck]
    )
    assert broken.returncode == 0, broken.stderr[-2000:]
    assert json.loads(broken.stdout.strip().splitlines()[-1])["masked"] > res["masked"]
    raw = tmp_path / "long.txt"
    raw.write_text(
        " ".join(tiny_corpus_lines(12, seed=7))
        + "\n"
        + "\n".join(tiny_corpus_lines(20, seed=8))
        + "\n"
    )
    text = run_script(
        "evaluate_mlm.py",
        ["--text", str(raw), "--synonym-table", table, "--device", "cpu", "--json", str(imported)],
    )
    assert text.returncode == 0, text.stderr[-2000:]
    out = json.loads(text.stdout.strip().splitlines()[-1])
    assert out["mlm_loss"] > 0 and "pred_corr_ratio" in out


@pytest.mark.slow
def test_electra_discriminator_alone_gets_a_warmed_up_generator(published, tmp_path):
    """A discriminator imported without its generator: the recipe adds a fresh generator (a
    quarter of the discriminator's width), trains it alone with the discriminator and the shared
    embeddings bit-identical, then continues with HC from that warm-up."""
    from hf_fixtures import save_electra_pair

    save_electra_pair(tmp_path / "disc", tmp_path / "gen", vocab=published["vocab"])
    imported = hf_convert.import_hf(tmp_path / "disc", tmp_path / "electra-disc")
    info = json.loads((imported / "import.json").read_text())
    assert info["model_args"]["electra_discriminator_only"] is True
    assert (
        info["model_args"]["electra_gen_hidden_dim"] == 8
        and info["model_args"]["electra_gen_heads"] == 1
    )
    data_bin = published["data_bin"]
    env = dict(
        SAVE_DIR=str(tmp_path / "hc"),
        HEAD_DIR=str(tmp_path / "gen_warm"),
        HEAD_UPDATES="3",
        MAX_SENTENCES="4",
        UPDATE_FREQ="1",
        PRECISION="fp32",
    )
    flags = [
        "--cpu",
        "--max-update",
        "2",
        "--log-interval",
        "1",
        "--disable-validation",
        "--synonym-kl-weight",
        "0.5",
    ]
    rec = run_recipe(
        "electra/pretrain.sh",
        [str(imported), str(data_bin), "mlm_sent_kl", *flags],
        tmp_path,
        **env,
    )
    log = rec.stdout + rec.stderr
    assert rec.returncode == 0, log[-3000:]
    assert "has no generator: warming a fresh one up for 3 updates" in log
    assert "the checkpoint has no generator: a fresh one (2 x 8" in log
    assert re.search(
        r"--electra-freeze-discriminator: \d+ discriminator and embedding parameters fixed, \d+ of the "
        r"generator trained",
        log,
    )
    assert re.search(r"Loaded checkpoint .*gen_warm/checkpoint_1_3\.pt", log)
    before, warm = (
        model_state(imported / "model.pt"),
        model_state(tmp_path / "gen_warm" / "checkpoint_1_3.pt"),
    )
    shared = [k for k in before if not k.startswith(("generator", "layernorm_eps"))]
    assert shared and all(
        torch.equal(before[k], warm[k]) for k in shared
    )  # discriminator and embeddings kept
    assert {"generator_head.dense.weight", "generator_bias"} <= set(warm)
    cont = model_state(tmp_path / "hc" / "checkpoint_last.pt")
    assert not torch.equal(
        warm["discriminator.layers.0.fc1.weight"], cont["discriminator.layers.0.fc1.weight"]
    )
    again = run_recipe(
        "electra/pretrain.sh",
        [str(imported), str(data_bin), "electra", *flags[:-2]],
        tmp_path,
        **dict(env, SAVE_DIR=str(tmp_path / "base")),
    )
    assert again.returncode == 0 and "is complete (checkpoint_1_3.pt)" in again.stderr


@pytest.mark.slow
def test_hydra_generator_warmup_keeps_the_discriminator(published, tmp_path):
    """examples/electra/config/generator_warmup.yaml on a discriminator imported alone."""
    from fairseq_runs import hydra_train
    from hf_fixtures import save_electra_pair
    from repo_paths import REPO

    save_electra_pair(tmp_path / "disc", tmp_path / "gen", vocab=published["vocab"])
    imported = hf_convert.import_hf(tmp_path / "disc", tmp_path / "electra-disc")
    warm = hydra_train(
        REPO / "examples" / "electra" / "config",
        "generator_warmup",
        [
            f"task.data={published['data_bin']}",
            f"model.electra_sizes_from={imported}",
            "task.tokens_per_sample=64",
            "task.electra_bf16_autocast=false",
            "dataset.batch_size=4",
            "optimization.update_freq=[1]",
            "dataset.disable_validation=true",
            f"checkpoint.restore_file={imported / 'model.pt'}",
            f"checkpoint.save_dir={tmp_path / 'warm'}",
            "optimization.max_update=2",
            "lr_scheduler.total_num_update=2",
        ],
        tmp_path / "run",
    )
    assert warm.returncode == 0, (warm.stdout + warm.stderr)[-3000:]
    before, after = (
        model_state(imported / "model.pt"),
        model_state(tmp_path / "warm" / "checkpoint_last.pt"),
    )
    assert all(torch.equal(before[k], after[k]) for k in before if not k.startswith("generator"))
    assert "generator_head.dense.weight" in after
