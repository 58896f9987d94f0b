"""One hydra override style everywhere: every field a recipe's run may change is declared in its
config, so overrides are written ``KEY=VALUE`` and never ``+KEY=VALUE`` (an append, which fails
on a declared field) or ``++KEY=VALUE``."""

import re

import pytest
from repo_paths import REPO

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
        ("mlm/config/roberta_base_sentkl.yaml", "task.batch_mlm_compile"),
        ("bert/config/base_continue_sr.yaml", "task.batch_mlm_compile_scope"),
        ("electra/config/small_scratch_hc.yaml", "task.electra_compile"),
        ("electra/config/base_continue_sr.yaml", "task.electra_compile_scope"),
    ],
)
def test_overridden_fields_are_declared(config, field):
    """hydra takes ``KEY=VALUE`` only for a key the config has: each field the READMEs and tests
    override is there (null: the arch's or the import's value)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "examples" / config)
    group, key = field.split(".")
    assert key in cfg[group], f"{config} does not declare {field}"


READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*):[-=]")


def environment_variables(script) -> set:
    """The variables ``script`` reads from the environment: every ``${VAR:-...}`` or
    ``${VAR:=...}``, less those the script sets itself first (``VAR=$(...)``, ``VAR=""``,
    ``read ... VAR``) rather than defaulting (``VAR=${VAR:-...}``)."""
    text = script.read_text(encoding="utf-8")
    read = set(READ.findall(text))
    own = {
        v
        for v in read
        if re.search(rf"(?:^|[\s;]){v}=(?!\$\{{{v}:[-=])", text, re.M)
        or re.search(rf"^\s*read\b[^\n]*\b{v}\b", text, re.M)
    }
    return read - own


@pytest.mark.parametrize(
    "recipe", sorted(p.parent.name for p in (REPO / "examples").glob("*/README.md"))
)
def test_each_recipe_readme_lists_the_variables_its_scripts_read(recipe):
    folder = REPO / "examples" / recipe
    readme = (folder / "README.md").read_text(encoding="utf-8")
    missing = {
        f"{script.name}: {v}"
        for script in folder.glob("*.sh")
        for v in environment_variables(script)
        if not re.search(rf"\b{v}\b", readme)
    }
    assert not missing, f"examples/{recipe}/README.md does not name: {sorted(missing)}"


def test_the_variable_reader_tells_settings_from_the_scripts_own(tmp_path):
    script = tmp_path / "x.sh"
    script.write_text(
        'LR=${LR:-1e-4}\nNAME=$(basename "$1")\nSAVE=${SAVE_DIR:-ck/${NAME}}\n'
        'read -r POS GEN <<< "$X"\necho "${GEN:-fresh}" "${WARMUP:=10}"\n'
    )
    assert environment_variables(script) == {"LR", "SAVE_DIR", "WARMUP"}


def test_the_mlm_configs_skip_over_long_valid_lines_as_the_script_does():
    assert "--skip-invalid-size-inputs-valid-test" in (
        REPO / "examples" / "mlm" / "pretrain.sh"
    ).read_text(encoding="utf-8")
    for config in sorted((REPO / "examples" / "mlm" / "config").glob("*.yaml")):
        assert "skip_invalid_size_inputs_valid_test: true" in config.read_text(), config.name
