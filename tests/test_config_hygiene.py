"""Configuration hygiene: fairseq merges command-line flags of the same name across the task,
model, criterion, optimizer, ... configs without a word, so no plugin field may share a name
with any other config field that can reach the same command line (unless it deliberately reads
that value through an interpolation), and every plugin field carries its owner's prefix."""

import dataclasses
import subprocess
import sys

import pytest
from repo_paths import REPO, USER_DIR

import truneg_fairseq  # noqa: F401  (registration)
from truneg_fairseq.core import objectives

PLUGIN = "truneg_fairseq"
OWNER_PREFIXES = (
    "synonym_",
    "mlm_",
    "electra_",
    "squad_",
    "cline_",
    "bert_",
    "wordpiece_",
    "fused_adamw_",
    "batch_mlm_",
)


def _groups():
    """{category: {name: dataclass}} for every config group a fairseq command line can hold."""
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import MODEL_DATACLASS_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    groups = {"task": dict(TASK_DATACLASS_REGISTRY), "model": dict(MODEL_DATACLASS_REGISTRY)}
    for cat, reg in REGISTRIES.items():
        groups[cat] = dict(reg["dataclass_registry"])
    fixed = {"task", "model", *REGISTRIES}
    for f in dataclasses.fields(FairseqConfig):
        if f.name not in fixed and dataclasses.is_dataclass(f.type):
            groups["top:" + f.name] = {f.name: f.type}
    return groups


def _is_plugin(cls) -> bool:
    return cls.__module__.startswith(PLUGIN)


def _interpolated(field) -> bool:
    return isinstance(field.default, str) and field.default.startswith("${")


def _own_fields(cls):
    """Fields the plugin class declares itself (not inherited from a fairseq config)."""
    inherited = set()
    for base in cls.__mro__[1:]:
        if dataclasses.is_dataclass(base) and not _is_plugin(base):
            inherited |= {f.name for f in dataclasses.fields(base)}
    return [
        f for f in dataclasses.fields(cls) if f.name not in inherited and not f.name.startswith("_")
    ]


def _plugin_classes(groups):
    return [
        (cat, name, cls)
        for cat, reg in groups.items()
        for name, cls in reg.items()
        if cls and _is_plugin(cls)
    ]


def test_the_plugin_registers_configs():
    names = {name for _, name, _ in _plugin_classes(_groups())}
    assert {"squad", "cline", *(e.criterion for e in objectives.entries())} <= names


def test_no_plugin_field_shares_a_flag_with_another_config():
    groups = _groups()
    clashes = []
    for cat, name, cls in _plugin_classes(groups):
        for f in _own_fields(cls):
            if _interpolated(f):
                continue  # reads another group's value on purpose (omegaconf II)
            if cat == "task" and f.name == "data":
                continue  # every fairseq task's positional DATA argument, not a flag
            for other_cat, reg in groups.items():
                if other_cat == cat:
                    continue  # two configs of one category never share a command line
                for other_name, other in reg.items():
                    if other is None:
                        continue
                    if f.name in {g.name for g in dataclasses.fields(other)}:
                        clashes.append(
                            f"{cat} {name}.{f.name} == {other_cat} {other_name}.{f.name}"
                        )
    assert clashes == []


def test_every_plugin_field_has_its_owner_prefix():
    unprefixed = [
        f"{cat} {name}: {f.name}"
        for cat, name, cls in _plugin_classes(_groups())
        for f in _own_fields(cls)
        if not _interpolated(f)
        and not f.name.startswith(OWNER_PREFIXES)
        and not (cat == "task" and f.name == "data")
    ]
    assert unprefixed == []


def _help(args):
    from truneg_fairseq.cli.train_help import training_help

    return training_help(args)


@pytest.mark.parametrize(
    "args",
    [
        ["--task", "electra", "--arch", "electra_small", "--criterion", "electra"],
        ["--task", "electra", "--arch", "electra_small", "--criterion", "mlm_sent_kl"],
        ["--task", "masked_lm", "--arch", "roberta_base", "--criterion", "mlm_soft_reg"],
        ["--task", "squad", "--arch", "roberta_base", "--criterion", "squad"],
    ],
)
def test_help_shows_each_flag_once(args):
    text = _help(args)
    flags = [line.split()[0].rstrip(",") for line in text.splitlines() if line.startswith("  --")]
    dupes = sorted({f for f in flags if flags.count(f) > 1})
    assert dupes == []
    # the plugin's own flags are there, each with its owner's prefix
    if args[1] == "electra":
        assert "--electra-rtd-synonym-policy" in flags and "--electra-gen-hidden-dim" in flags
        assert "--rtd-synonym-policy" not in flags


def test_train_help_script_lists_plugin_flags():
    """fairseq-train --help stops before the task/criterion flags; scripts/train_help.py does not."""
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "train_help.py"),
            "--user-dir",
            USER_DIR,
            "--task",
            "electra",
            "--arch",
            "electra_small",
            "--criterion",
            "mlm_hard_correction",
            "--help",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("\n  --synonym-table") == 1
    assert out.stdout.count("\n  --electra-disc-weight") == 1


def test_criterion_reads_the_task_mask_prob_without_a_fallback(data_bin):
    """0 is a legitimate value and must arrive as 0 (an `or 0.15` fallback turned it into 0.15)."""
    from fairseq_runs import TINY_ELECTRA, build_components

    _, _, crit = build_components(
        data_bin,
        ["--criterion", "electra", "--mask-prob", "0.25"],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    assert crit.mask_prob == 0.25
    _, _, crit = build_components(
        data_bin,
        ["--criterion", "electra", "--mask-prob", "0"],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    assert crit.mask_prob == 0.0


def test_electra_only_flags_refused_on_roberta(data_bin):
    from fairseq_runs import TINY_TN_ROBERTA, build_components

    with pytest.raises(ValueError, match="--electra-disc-weight only applies to ELECTRA"):
        build_components(
            data_bin,
            ["--criterion", "mlm_soft_reg", "--electra-disc-weight", "10"],
            arch_args=TINY_TN_ROBERTA,
        )


def test_criterion_model_mismatch_before_any_step(data_bin, tmp_path):
    """A translation transformer with a masked-LM criterion stops when the criterion is built:
    rc 1 and one message, no crash.pt, no traceback through a training step."""
    from fairseq_runs import fairseq_train

    out = fairseq_train(
        data_bin,
        tmp_path / "ckpt",
        [
            "--task",
            "language_modeling",
            "--arch",
            "transformer_lm",
            "--decoder-layers",
            "1",
            "--decoder-embed-dim",
            "16",
            "--decoder-ffn-embed-dim",
            "16",
            "--decoder-attention-heads",
            "2",
            "--criterion",
            "mlm_hard_correction",
            "--synonym-table",
            "synonyms.npz",
            "--max-update",
            "1",
            "--tokens-per-sample",
            "32",
            "--batch-size",
            "4",
        ],
        check=False,
    )
    assert out.returncode != 0
    assert "needs a masked-LM model" in out.stderr + out.stdout
    assert "TransformerLanguageModel" in out.stderr + out.stdout
    assert not (tmp_path / "ckpt" / "crash.pt").exists()
    assert "begin training epoch" not in out.stderr + out.stdout


@pytest.mark.parametrize(
    "criterion,needs",
    [(e.criterion, e.outputs[0]) for e in objectives.entries() if e.outputs],
)
def test_what_fairseqs_roberta_cannot_serve_is_refused_when_the_criterion_is_built(
    data_bin, synonym_table, criterion, needs
):
    """fairseq's RoBERTa forward gives the masked-LM logits only: objectives that need more are
    refused before any step, naming the plugin arch with the same weights; any DDP backend is
    accepted (every objective runs inside the model's forward)."""
    from fairseq_runs import TINY_TN_ROBERTA, build_components

    with pytest.raises(
        ValueError,
        match=f"--criterion {criterion} needs the model's forward to return {needs}.*"
        "--arch roberta_base \\(RobertaModel\\).*--arch truneg_roberta_base",
    ):
        build_components(data_bin, ["--criterion", criterion])
    with pytest.raises(
        ValueError, match="--mlm-prediction-slots static needs the plugin's forward"
    ):
        build_components(
            data_bin,
            [
                "--criterion",
                "mlm_hard_correction",
                "--synonym-table",
                str(synonym_table),
                "--mlm-prediction-slots",
                "static",
            ],
        )
    for backend in ("pytorch_ddp", "c10d", "legacy_ddp", "no_c10d"):
        build_components(
            data_bin,
            ["--criterion", criterion, "--distributed-world-size", "2", "--ddp-backend", backend],
            arch_args=TINY_TN_ROBERTA,
        )


@pytest.mark.parametrize(
    "config,arch_sizes",
    [
        ("electra/config/small_scratch.yaml", (128, 256, 12, 64)),
        ("electra/config/base_published_hc.yaml", (768, 768, 12, 256)),
        ("cline/config/electra_base_cline.yaml", (768, 768, 12, 256)),
    ],
)
def test_hydra_arch_names_size_electra(config, arch_sizes):
    """fairseq-hydra-train fills a model config's missing fields from the dataclass before the
    arch function runs: the ELECTRA sizes are left unset there, so ``_name: electra_small`` gives
    ELECTRA-small and not the dataclass's defaults."""
    from fairseq.dataclass.initialize import add_defaults
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from omegaconf import OmegaConf, open_dict

    cfg = OmegaConf.load(REPO / "examples" / config)
    add_defaults(cfg)
    with open_dict(cfg.model):
        ARCH_CONFIG_REGISTRY[cfg.model._name](cfg.model)
    m = cfg.model
    assert (
        m.electra_embed_dim,
        m.electra_hidden_dim,
        m.electra_layers,
        m.electra_gen_hidden_dim,
    ) == arch_sizes
