"""One hydra override style everywhere: every field a recipe's run may change is declared in its
config, so overrides are written ``KEY=VALUE`` and never ``+KEY=VALUE`` (an append, which fails
on a declared field) or ``++KEY=VALUE``."""

import re

import pytest
from utils import REPO

APPEND = re.compile(
    r"(?:^|[\s\"'`(\[])\+\+?(?:model|task|criterion|common|dataset|optimization|"
    r"optimizer|lr_scheduler|checkpoint|distributed_training)\.\w+="
)
DOCS = ["docs/fine-tuning.md", "docs/cline.md", "docs/electra.md"]


def recipe_files():
    files = [p for p in (REPO / "examples").rglob("*") if p.suffix in (".sh", ".md", ".yaml")]
    return files + [REPO / d for d in DOCS if (REPO / d).is_file()]


def test_no_append_overrides_in_examples_and_docs():
    found = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in recipe_files()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if APPEND.search(line)
    ]
    assert not found, "append-style hydra overrides (write KEY=VALUE):\n" + "\n".join(found)


def test_the_pattern_finds_the_other_style():
    assert APPEND.search("    +model.electra_layers=2 task.data=x")
    assert APPEND.search('"++criterion.synonym_sr_weight=1.0"')
    assert not APPEND.search("model.electra_layers=2 a+b=3 lr 1e+5")


@pytest.mark.parametrize(
    "config,field",
    [
        ("mlm/config/roberta_base_hc.yaml", "model.encoder_layers"),
        ("mlm/config/roberta_base_sr.yaml", "criterion.synonym_sr_weight"),
        ("mlm/config/roberta_base_sentkl.yaml", "criterion.synonym_kl_weight"),
        ("cline/config/roberta_base_cline.yaml", "model.encoder_embed_dim"),
        ("cline/config/electra_base_cline.yaml", "model.electra_sizes_from"),
        ("electra/config/small_scratch.yaml", "model.electra_gen_layers"),
        ("electra/config/base_continue.yaml", "model.electra_layernorm_eps"),
        ("electra/config/base_published_hc.yaml", "model.electra_max_positions"),
        ("bert/config/base_continue_hc.yaml", "model.max_positions"),
        ("bert/config/head_warmup.yaml", "model.encoder_attention_heads"),
    ],
)
def test_overridden_fields_are_declared(config, field):
    """hydra takes ``KEY=VALUE`` only for a key the config has: each field the READMEs and tests
    override is there (null: the arch's or the import's value)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "examples" / config)
    group, key = field.split(".")
    assert key in cfg[group], f"{config} does not declare {field}"
