"""Files from outside run no code: a checkpoint of plain data whose config holds code where
fairseq evaluates a value, and a HuggingFace config.json whose values would reach a command line.
Each case runs the real scripts and asserts that the marker file the payload would create does
not appear and that the error names the file and the field."""

import json
import re
from pathlib import Path

import pytest
import torch
from hf_fixtures import save_bert, wordpiece_vocab
from utils import TINY_ROBERTA, fairseq_train, run_script


def _payload(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}') or None"


@pytest.fixture(scope="module")
def plain_checkpoint(data_bin, tmp_path_factory):
    save = tmp_path_factory.mktemp("plain") / "run"
    fairseq_train(data_bin, save, [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"])
    return save / "checkpoint_last.pt"


def _crafted(plain: Path, out: Path, where: str, field: str, value: str) -> Path:
    """A copy of a real checkpoint with one config field set; still plain data."""
    state = torch.load(plain, map_location="cpu", weights_only=True)
    group = state["cfg"][where]
    if isinstance(group, dict):
        group[field] = value
    else:  # fairseq keeps a legacy model's arguments as a namespace
        setattr(group, field, value)
    torch.save(state, out)
    torch.load(out, weights_only=True)  # it passes torch's weights-only load
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "where,field", [("model", "encoder_xformers_att_config"), ("optimizer", "adam_betas")]
)
def test_checkpoint_config_with_code_is_refused_everywhere(
    plain_checkpoint, data_bin, tmp_path, where, field
):
    marker = tmp_path / "PWNED"
    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", where, field, _payload(marker))
    runs = {
        "export": run_script(
            "convert_hf.py", ["export", str(evil), str(tmp_path / "hf"), "--data", str(data_bin)]
        ),
        "evaluate": run_script("evaluate_mlm.py", ["--data", str(data_bin), str(evil)]),
    }
    if (
        where == "optimizer"
    ):  # fairseq-train builds its optimizer from the command line, not from here
        runs["restore"] = fairseq_train(
            data_bin,
            tmp_path / "ft",
            [
                *TINY_ROBERTA,
                "--criterion",
                "masked_lm",
                "--max-update",
                "1",
                "--restore-file",
                str(evil),
            ],
            check=False,
        )
    for name, proc in runs.items():
        assert not marker.exists(), name
        assert proc.returncode != 0, name
        assert (
            f"cfg.{where}.{field}" in proc.stderr and "fairseq evaluates this field" in proc.stderr
        ), name
        if name != "restore":
            assert "Traceback" not in proc.stderr, name
    assert not (tmp_path / "hf").exists()


def test_literal_values_still_load(plain_checkpoint, tmp_path):
    """A literal stays what it was: fairseq evaluates the literal's own repr."""
    from fairseq import checkpoint_utils

    import truneg_fairseq  # noqa: F401  (installs the check)

    path = _crafted(plain_checkpoint, tmp_path / "ok.pt", "optimizer", "adam_betas", " (0.9, 0.98)")
    state = checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert eval(state["cfg"].optimizer.adam_betas) == (0.9, 0.98)  # the literal, rewritten


def _other_architecture(
    plain: Path,
    out: Path,
    payload: str,
    old_style: bool,
    arch: str = "fconv_lm",
    field: str = "decoder_layers",
) -> Path:
    """A copy of a real checkpoint that says it is fairseq's ``arch`` with code in ``field`` (a
    value that architecture passes to ``eval``): still plain data. ``old_style`` writes it as a
    checkpoint of fairseq's argparse era, one ``args`` namespace and no ``cfg``."""
    import argparse

    state = torch.load(plain, map_location="cpu", weights_only=True)
    if old_style:
        flat = {}
        for group in (
            "common",
            "checkpoint",
            "dataset",
            "optimization",
            "task",
            "criterion",
            "optimizer",
            "lr_scheduler",
        ):
            value = state["cfg"].get(group)
            flat.update(vars(value) if isinstance(value, argparse.Namespace) else dict(value or {}))
        flat.update(vars(state["cfg"]["model"]))
        flat = {k: v for k, v in flat.items() if k != "_name"}
        flat.update({"arch": arch, field: payload, "task": "masked_lm", "criterion": "masked_lm"})
        state["args"] = argparse.Namespace(**flat)
        state["cfg"] = None
    else:
        model = state["cfg"]["model"]
        setattr(model, "_name", arch)
        setattr(model, "arch", arch)
        setattr(model, field, payload)
    torch.save(state, out)
    torch.load(out, weights_only=True)  # it passes torch's weights-only load
    return out


@pytest.mark.parametrize("old_style", [False, True], ids=["cfg", "args"])
def test_a_checkpoint_of_another_family_is_refused_before_anything_is_built(
    plain_checkpoint, data_bin, tmp_path, old_style
):
    from fairseq import checkpoint_utils

    import truneg_fairseq  # noqa: F401  (installs the checks)
    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
    from truneg_fairseq.compat import UnsafeCheckpointError

    marker = tmp_path / "PWNED"
    evil = _other_architecture(plain_checkpoint, tmp_path / "evil.pt", _payload(marker), old_style)
    with pytest.raises(
        CheckpointError,
        match=r"evil\.pt is a checkpoint of architecture 'fconv_lm', which the "
        r"plugin does not load: .*electra.*roberta",
    ):
        load_for_inference(evil, str(data_bin))
    # fairseq's own loaders under the plugin (what fairseq-validate or a resume call) refuse the field
    with pytest.raises(
        UnsafeCheckpointError, match=r"decoder_layers is .*fairseq evaluates this field"
    ):
        checkpoint_utils.load_model_ensemble_and_task(
            [str(evil)], arg_overrides={"data": str(data_bin)}
        )
    runs = {
        "evaluate": run_script("evaluate_mlm.py", ["--data", str(data_bin), str(evil)]),
        "export": run_script(
            "convert_hf.py", ["export", str(evil), str(tmp_path / "hf"), "--data", str(data_bin)]
        ),
    }
    for name, proc in runs.items():
        assert not marker.exists(), name
        assert proc.returncode != 0, name
        lines = [line for line in proc.stderr.splitlines() if "fconv_lm" in line]
        assert len(lines) == 1 and str(evil) in lines[0] and "does not load" in lines[0], (
            name,
            proc.stderr[-2000:],
        )
        assert "Traceback" not in proc.stderr, name
    assert not marker.exists() and not (tmp_path / "hf").exists()


# Every way a fairseq architecture outside the plugin's families would run a config string: the
# architecture and the field it passes to ``eval`` (fairseq 0.12's models).
CODE_ROUTES = [
    ("fconv_lm", "decoder_layers"),
    ("fconv", "encoder_layers"),
    ("fconv_self_att", "decoder_layers"),
    ("transformer_lm", "character_filters"),
    ("lightconv_lm", "character_filters"),
    ("wav2vec2", "conv_feature_layers"),
    ("hubert", "conv_feature_layers"),
    ("wav2vec", "conv_aggregator_layers"),
]


@pytest.mark.parametrize("old_style", [False, True], ids=["cfg", "args"])
@pytest.mark.parametrize("arch,field", CODE_ROUTES, ids=[f"{a}.{f}" for a, f in CODE_ROUTES])
def test_every_code_route_is_refused_by_every_loader(
    plain_checkpoint, data_bin, tmp_path, arch, field, old_style
):
    """The plugin's inference loader (evaluate_mlm, convert_hf export, glue/squad prediction), the
    plugin's hub entry, fairseq's own loader under the plugin (fairseq-validate, a resume) and
    fairseq's hub (``RobertaModel.from_pretrained``) refuse the crafted checkpoint; the payload
    never runs."""
    from fairseq import checkpoint_utils, hub_utils

    import truneg_fairseq  # noqa: F401  (installs the checks)
    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
    from truneg_fairseq.compat import UnsafeCheckpointError
    from truneg_fairseq.models import hub as plugin_hub

    marker = tmp_path / "PWNED"
    evil = _other_architecture(
        plain_checkpoint, tmp_path / "evil.pt", _payload(marker), old_style, arch, field
    )
    with pytest.raises(CheckpointError, match=rf"architecture '{arch}', which the plugin does not"):
        load_for_inference(evil, str(data_bin))
    with pytest.raises(CheckpointError, match=rf"architecture '{arch}', which the plugin does not"):
        plugin_hub.from_pretrained(
            str(tmp_path), checkpoint_file="evil.pt", data_name_or_path=str(data_bin)
        )
    with pytest.raises(UnsafeCheckpointError, match=rf"{field} is .*fairseq evaluates this field"):
        checkpoint_utils.load_model_ensemble_and_task(
            [str(evil)], arg_overrides={"data": str(data_bin)}
        )
    with pytest.raises(UnsafeCheckpointError, match=rf"{field} is .*fairseq evaluates this field"):
        hub_utils.from_pretrained(
            str(tmp_path), checkpoint_file="evil.pt", data_name_or_path=str(data_bin)
        )
    assert not marker.exists()


def test_the_loadable_families_are_the_plugins_own():
    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.compat import loadable_architectures

    names = loadable_architectures()
    for arch in (
        "roberta",
        "roberta_base",
        "roberta_large",
        "truneg_roberta_base",
        "bert_hf_base",
        "electra_small",
        "electra",
        "cline_roberta_base",
        "cline_electra_small",
        "cline_bert_hf_base",
    ):
        assert arch in names, arch
    for arch in (
        "fconv_lm",
        "fconv",
        "fconv_self_att",
        "transformer_lm",
        "lightconv_lm",
        "wav2vec2",
        "hubert",
        "wav2vec",
        "s2t_transformer",
        "transformer",
        "roberta_enc_dec",
        "bert_base",
    ):
        assert arch not in names, arch


def _old_style(state: dict):
    """``state`` rewritten as a checkpoint of fairseq's argparse era (one flat ``args``
    namespace, no ``cfg``); returns the namespace."""
    import argparse

    flat = {}
    for group in ("common", "checkpoint", "dataset", "optimization", "task", "criterion"):
        flat.update(dict(state["cfg"].get(group) or {}))
    for group in ("optimizer", "lr_scheduler"):
        flat.update({k: v for k, v in dict(state["cfg"].get(group) or {}).items() if k != "_name"})
    flat.update(vars(state["cfg"]["model"]))
    flat.pop("_name", None)
    state["args"], state["cfg"] = argparse.Namespace(**flat), None
    return state["args"]


def _nested(state: dict, case: str, payload: str) -> str:
    """``state`` with ``payload`` placed as case says; returns the dotted path to be named."""
    import argparse

    model = state["cfg"]["model"]
    if case == "dict-under-encoder":  # fairseq's TransformerConfig reads args.encoder as a group
        model.encoder = {"embed_dim": 32, "xformers_att_config": payload}
        return "cfg.model.encoder.xformers_att_config"
    if case == "namespace-in-namespace":
        model.encoder = argparse.Namespace(xformers_att_config=payload)
        return "cfg.model.encoder.xformers_att_config"
    if case == "list-element":
        state["cfg"]["optimizer"]["adam_betas"] = [0.9, payload]
        return "cfg.optimizer.adam_betas[1]"
    if case == "unknown-field":
        model.build_hook = payload
        return "cfg.model.build_hook"
    _old_style(state).encoder = {"xformers_att_config": payload}  # old-style args
    return "args.encoder.xformers_att_config"


NESTED = ["dict-under-encoder", "namespace-in-namespace", "list-element", "unknown-field", "args"]


def _nested_checkpoint(plain: Path, root: Path, case: str, payload: str):
    state = torch.load(plain, map_location="cpu", weights_only=True)
    dotted = _nested(state, case, payload)
    (root / "ck").mkdir()
    evil = root / "ck" / "model.pt"
    torch.save(state, evil)
    torch.load(evil, weights_only=True)  # it passes torch's weights-only load
    return evil, dotted


@pytest.mark.parametrize("case", NESTED)
def test_a_payload_nested_anywhere_in_the_config_is_refused_by_every_loader(
    plain_checkpoint, data_bin, tmp_path, case
):
    """truneg-evaluate, the plugin's hub and fairseq's own loader (fairseq-validate, fairseq's
    hub) refuse a checkpoint whose config holds code, or an unknown field, below the fields it
    checks by name, with one error naming the field's dotted path; the payload never runs."""
    from fairseq import checkpoint_utils, hub_utils

    import truneg_fairseq  # noqa: F401  (installs the checks)
    from truneg_fairseq.checkpoints import CheckpointError
    from truneg_fairseq.compat import UnsafeCheckpointError
    from truneg_fairseq.models import hub as plugin_hub

    marker = tmp_path / "PWNED"
    evil, dotted = _nested_checkpoint(plain_checkpoint, tmp_path, case, _payload(marker))
    proc = run_script("evaluate_mlm.py", ["--data", str(data_bin), str(evil)])
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if dotted in line]
    assert len(lines) == 1 and f"{evil}: {dotted} " in lines[0], proc.stderr[-2000:]
    with pytest.raises(CheckpointError, match=re.escape(f"{evil}: {dotted} ")):
        plugin_hub.from_pretrained(evil.parent, data_name_or_path=str(data_bin))
    with pytest.raises(UnsafeCheckpointError, match=re.escape(f"{evil}: {dotted} ")):
        checkpoint_utils.load_model_ensemble_and_task(
            [str(evil)], arg_overrides={"data": str(data_bin)}
        )
    with pytest.raises(UnsafeCheckpointError, match=re.escape(f"{dotted} ")):
        hub_utils.from_pretrained(
            str(evil.parent), checkpoint_file="model.pt", data_name_or_path=str(data_bin)
        )
    assert not marker.exists()


def test_fairseq_validate_refuses_a_nested_payload_in_one_line(
    plain_checkpoint, data_bin, tmp_path
):
    from test_validate import fairseq_validate

    marker = tmp_path / "PWNED"
    evil, dotted = _nested_checkpoint(
        plain_checkpoint, tmp_path, "dict-under-encoder", _payload(marker)
    )
    proc = fairseq_validate(data_bin, evil, ["--task", "masked_lm"])
    assert not marker.exists()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if dotted in line]
    assert len(lines) == 1 and str(evil) in lines[0], proc.stderr[-3000:]
    assert "| valid |" not in proc.stdout  # nothing was scored


@pytest.mark.parametrize("old_style", [False, True], ids=["cfg", "args"])
def test_fairseqs_own_configs_still_load_rebuilt(plain_checkpoint, data_bin, tmp_path, old_style):
    """A real checkpoint (and its old-style ``args`` form) loads through the plugin's loader and
    fairseq's, its rebuilt config holding the same values."""
    from fairseq import checkpoint_utils

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.checkpoints import load_for_inference

    state = torch.load(plain_checkpoint, map_location="cpu", weights_only=True)
    layers = state["cfg"]["model"].encoder_layers
    if old_style:
        _old_style(state)
    path = tmp_path / "model.pt"
    torch.save(state, path)
    models, cfg, _ = load_for_inference(path, str(data_bin))
    assert (
        cfg.model.encoder_layers == layers
        and len(models[0].encoder.sentence_encoder.layers) == layers
    )
    models, cfg, _ = checkpoint_utils.load_model_ensemble_and_task(
        [str(path)], arg_overrides={"data": str(data_bin)}
    )
    assert cfg.model.encoder_layers == layers


def fairseq_evaluated_fields():
    """The config fields the installed fairseq evaluates as Python, read from its source: the
    first argument of every ``eval(...)`` and ``eval_str_list/eval_str_dict/eval_bool(...)``
    call, when it is a field (``cfg.x``, ``args.x``, ``getattr(args, "x")``) or a variable named
    as one of fairseq's options (``xformers_att_config`` handed down as a parameter). What else
    reaches an ``eval`` (a line of a data file, argparse converting the command line) is no
    checkpoint field; those call sites are returned too, so that the test shows they were seen."""
    import ast

    import fairseq

    root = Path(fairseq.__file__).parent
    sources = {
        p: p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*.py"))
    }
    options = set()
    for text in sources.values():
        options.update(
            m.replace("-", "_")
            for m in re.findall(r"[\"']--([A-Za-z0-9][A-Za-z0-9_-]*)[\"']", text)
        )
        options.update(
            re.findall(r"^\s+([A-Za-z_][A-Za-z0-9_]*)\s*:[^=\n]+=\s*field\(", text, re.M)
        )
    fields, other = set(), []
    for path, text in sources.items():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            python_eval = isinstance(f, ast.Name) and f.id == "eval"
            helper = (
                f.id
                if isinstance(f, ast.Name)
                else f.attr
                if isinstance(f, ast.Attribute)
                else None
            ) in ("eval_str_list", "eval_str_dict", "eval_bool")
            if not (python_eval or helper):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Attribute):
                fields.add(arg.attr)
            elif (
                isinstance(arg, ast.Call)
                and isinstance(arg.func, ast.Name)
                and arg.func.id == "getattr"
                and len(arg.args) >= 2
                and isinstance(arg.args[1], ast.Constant)
            ):
                fields.add(arg.args[1].value)
            elif isinstance(arg, ast.Name) and arg.id in options:
                fields.add(arg.id)
            else:
                other.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(arg)}")
    return fields, other


def test_every_field_fairseq_evaluates_is_checked():
    from truneg_fairseq.compat import _evaluated

    fields, other = fairseq_evaluated_fields()
    assert {
        "decoder_layers",
        "encoder_layers",
        "character_filters",
        "conv_feature_layers",
        "conv_aggregator_layers",
        "adam_betas",
        "xformers_att_config",
    } <= fields  # the scan finds them
    assert sorted(f for f in fields if not _evaluated(f)) == []
    # what is not a field: data lines, argparse converters (x, uf), local strings of a script
    assert all(re.search(r": (x|uf|line(\.strip\(\))?|[a-z_]+)$", site) for site in other), other


def _evaluated_payload(state: dict, form: str, field: str, payload: str) -> str:
    """``state`` (a real checkpoint's) with ``payload`` in ``field`` nested in one of the forms a
    fairseq config takes; returns the field's dotted path."""
    import argparse

    model = state["cfg"]["model"]
    if form == "dict":
        model.encoder = {"embed_dim": 32, field: payload}
        return f"cfg.model.encoder.{field}"
    if form == "namespace":
        model.encoder = argparse.Namespace(**{field: payload})
        return f"cfg.model.encoder.{field}"
    if form == "list":
        model.encoder = [{field: payload}]
        return f"cfg.model.encoder[0].{field}"
    _old_style(state).decoder = {field: payload}
    return f"args.decoder.{field}"


def test_no_import_in_fairseq_is_named_by_a_checkpoint_field():
    """Every ``import_module`` / ``__import__`` / hydra ``instantiate`` call in the installed
    fairseq imports a name built from its own package's files (no config field in its argument),
    and ``import_user_module`` (``--user-dir``) is called only with what a command line or a hub
    call's own arguments give, never with a config read from a checkpoint."""
    import ast

    import fairseq

    roots = [Path(fairseq.__file__).parent, Path(fairseq.__file__).parent.parent / "fairseq_cli"]
    field_like, user_module = [], []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "examples" in path.parts:
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                site = f"{path.relative_to(root.parent)}:{node.lineno}"
                if name in ("import_module", "__import__", "instantiate") and node.args:
                    reads = [
                        n
                        for n in ast.walk(node.args[0])
                        if isinstance(n, ast.Attribute)
                        or isinstance(n, ast.Call)
                        and getattr(n.func, "id", None) == "getattr"
                    ]
                    if reads:
                        field_like.append(f"{site}: {ast.unparse(node.args[0])}")
                elif name == "import_user_module":
                    user_module.append(site)
    assert field_like == []
    # the command-line parsers, the hub's own keyword and the fairseq_cli entry points (each on
    # the configuration of the command being run)
    assert all(
        s.startswith(("fairseq/options.py", "fairseq/hub_utils.py", "fairseq_cli/"))
        for s in user_module
    ), user_module


@pytest.mark.parametrize("form", ["dict", "dictconfig", "namespace", "list", "args"])
def test_every_field_fairseq_evaluates_is_refused_at_any_depth(plain_checkpoint, form):
    """The fields read from fairseq's source, each nested in a sub-dict, a DictConfig, a
    namespace inside the model's namespace, a list element, an old-style ``args``: the rebuilt
    config refuses each, naming its dotted path."""
    import copy

    from omegaconf import OmegaConf

    from truneg_fairseq.compat import UnsafeCheckpointError, rebuild_args, rebuild_config

    fields, _ = fairseq_evaluated_fields()
    base = torch.load(plain_checkpoint, map_location="cpu", weights_only=True)
    for field in sorted(fields):
        state = copy.deepcopy(base)
        dotted = _evaluated_payload(state, form.replace("dictconfig", "dict"), field, "print(1)")
        with pytest.raises(UnsafeCheckpointError) as e:
            if form == "args":
                rebuild_args(state["args"], "f.pt")
            elif form == "dictconfig":
                rebuild_config(
                    OmegaConf.create(state["cfg"], flags={"allow_objects": True}), "f.pt"
                )
            else:
                rebuild_config(state["cfg"], "f.pt")
        assert f"f.pt: {dotted} is 'print(1)': fairseq evaluates this field" in str(e.value), field


@pytest.mark.parametrize(
    "text,ok",
    [
        ("[(512, 3)] * 20", True),
        ("[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2", True),
        (" (0.9, 0.98)", True),
        ("0,2", True),
        ("True", True),
        ("{'a': [1, 2]}", True),
        ("[0] * 10 ** 12", False),
        ("[0] * 100000 * 100000", False),
        ("__import__('os')", False),
        ("[x for x in ()]", False),
        ("().__class__", False),
    ],
)
def test_fairseqs_own_default_forms_pass_and_code_does_not(text, ok):
    from truneg_fairseq.compat import UnsafeCheckpointError, safe_literal

    if ok:
        assert eval(safe_literal(text, "f")) == eval(text.strip())
    else:
        with pytest.raises(UnsafeCheckpointError):
            safe_literal(text, "f")


@pytest.mark.parametrize(
    "key,value",
    [
        ("hidden_dropout_prob", "--user-dir=EVILPKG"),
        ("num_hidden_layers", "--user-dir=EVILPKG"),
        ("layer_norm_eps", "__import__('os').system('touch MARKER')"),
        ("hidden_size", True),
        ("hidden_act", ["gelu"]),
    ],
)
def test_hf_config_values_are_type_checked_before_anything_is_built(tmp_path, key, value):
    vocab = wordpiece_vocab()
    hf = tmp_path / "hf"
    save_bert(hf, vocab=vocab)
    marker = tmp_path / "PWNED"
    pkg = hf / "evilpkg"  # shipped inside the downloaded directory
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    config = json.loads((hf / "config.json").read_text())
    text = (
        value.replace("EVILPKG", str(pkg)).replace("MARKER", str(marker))
        if isinstance(value, str)
        else value
    )
    config[key] = text
    (hf / "config.json").write_text(json.dumps(config))
    proc = run_script(
        "convert_hf.py", ["import", str(hf), str(tmp_path / "out")], cwd=str(tmp_path)
    )
    assert not marker.exists()
    assert proc.returncode == 2
    assert f"{hf / 'config.json'}: {key} must be" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


# ---- no command deletes what it did not write ------------------------------------------------


def _snapshot(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("imp")
    save_bert(root / "hf", vocab=wordpiece_vocab())
    proc = run_script("convert_hf.py", ["import", str(root / "hf"), str(root / "out")])
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.parametrize(
    "case", ["export_into_run_dir", "import_into_cwd", "import_over_source", "export_over_hf"]
)
def test_outputs_never_replace_what_the_command_did_not_write(
    imported, plain_checkpoint, data_bin, tmp_path, case
):
    import shutil

    if case == "export_into_run_dir":  # export run1/checkpoint_last.pt run1
        run = tmp_path / "run1"
        shutil.copytree(plain_checkpoint.parent, run)
        target, args = (
            run,
            [
                "export",
                str(run / "checkpoint_last.pt"),
                str(run),
                "--data",
                str(data_bin),
                "--spm-model",
                str(data_bin.parent / "spm.model"),
            ],  # fmt: skip
        )
    elif case == "import_into_cwd":  # import HF .
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        (cwd / "notes.txt").write_text("mine")
        target, args = cwd, ["import", str(imported / "hf"), "."]
    elif case == "import_over_source":  # output = input
        src = tmp_path / "hf"
        shutil.copytree(imported / "hf", src)
        target, args = src, ["import", str(src), str(src)]
    else:  # export into a HuggingFace directory that the export did not write
        hf = tmp_path / "hf"
        shutil.copytree(imported / "hf", hf)
        target, args = hf, ["export", str(imported / "out" / "model.pt"), str(hf)]
    before = _snapshot(target)
    proc = run_script(
        "convert_hf.py", args, cwd=str(target if case == "import_into_cwd" else tmp_path)
    )
    assert proc.returncode == 2, proc.stderr
    assert "already holds" in proc.stderr and "never deletes anything else" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _snapshot(target) == before
    assert not [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


def test_perturb_into_its_input_keeps_the_original(tmp_path):
    from glue_fixtures import write_glue

    task_dir = write_glue(tmp_path / "g") / "RTE"
    before = _snapshot(task_dir)
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task_dir), str(task_dir)])
    assert proc.returncode == 2 and "is the input" in proc.stderr
    proc = run_script(
        "perturb.py", ["glue", "--task", "RTE", str(task_dir), str(tmp_path / "g" / "SST-2")]
    )
    assert proc.returncode == 2 and "already holds" in proc.stderr
    assert _snapshot(task_dir) == before


def test_rerun_replaces_its_own_output_and_another_run_is_locked_out(imported, tmp_path):
    from truneg_fairseq.io_utils import OutputDirError, atomic_dir

    out = tmp_path / "out"
    for version in ("one", "two"):
        with atomic_dir(out, "a command") as work:
            (work / "v.txt").write_text(version)
    assert (out / "v.txt").read_text() == "two"
    with pytest.raises(OutputDirError, match="already holds the output of `a command`"):
        with atomic_dir(out, "another command"):
            pass
    lock = tmp_path / ".out.lock"
    lock.write_text("1")  # pid 1 is alive: another run holds the directory
    with pytest.raises(OutputDirError, match=r"being written by another run \(pid 1"):
        with atomic_dir(out, "a command"):
            pass
    lock.write_text("999999999")  # a run that ended without removing its lock
    with atomic_dir(out, "a command") as work:
        (work / "v.txt").write_text("three")
    assert (out / "v.txt").read_text() == "three" and not lock.exists()


_REPLACER = """
import sys, time
from pathlib import Path
from truneg_fairseq.io_utils import atomic_dir
out = Path(sys.argv[1])
print("ready", flush=True)
with atomic_dir(out, "a command") as work:
    for i in range(200):
        (work / f"f{i}.txt").write_text("new" * 1000)
print("done", flush=True)
"""


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.04])
def test_a_kill_during_replacement_leaves_one_whole_directory(tmp_path, delay):
    import signal
    import subprocess
    import sys
    import time

    from truneg_fairseq.io_utils import atomic_dir

    out = tmp_path / "out"
    with atomic_dir(out, "a command") as work:
        for i in range(200):
            (work / f"f{i}.txt").write_text("old" * 1000)
    proc = subprocess.Popen(
        [sys.executable, "-c", _REPLACER, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)  # somewhere in the writing or the renames
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def whole(d):
        texts = {(d / f"f{i}.txt").read_text() for i in range(200)} if d.is_dir() else set()
        return texts in ({"old" * 1000}, {"new" * 1000})

    # the files are replaced one by one: the next run first puts an interrupted swap right (one
    # whole set, old or new, in the output), then writes; no leftover remains
    with atomic_dir(out, "a command") as work:
        assert whole(out)
        (work / "f0.txt").write_text("next")
    assert (out / "f0.txt").read_text() == "next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ---- wrong results in silence become one clear error ----------------------------------------


def test_weights_with_more_layers_than_the_config_are_refused(tmp_path):
    from truneg_fairseq.convert.hf import ConversionError, import_hf

    save_bert(tmp_path / "hf", vocab=wordpiece_vocab())  # 2 layers
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    config["num_hidden_layers"] = 1
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match=r"num_hidden_layers is 1 but the weights have 2"):
        import_hf(tmp_path / "hf", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_generator_with_other_embedding_values_is_refused_unless_allowed(tmp_path):
    from hf_fixtures import save_electra_pair
    from safetensors.torch import load_file, save_file

    from truneg_fairseq.convert.hf import ConversionError, import_hf

    save_electra_pair(tmp_path / "disc", tmp_path / "gen")
    weights = tmp_path / "gen" / "model.safetensors"
    state = load_file(str(weights))
    state["electra.embeddings.word_embeddings.weight"] = (
        state["electra.embeddings.word_embeddings.weight"] + 0.01
    )
    save_file(state, str(weights))
    with pytest.raises(
        ConversionError,
        match="differ in electra.embeddings.word_embeddings.weight.*not a published pair",
    ):
        import_hf(tmp_path / "disc", tmp_path / "out", generator_dir=tmp_path / "gen")
    assert not (tmp_path / "out").exists()
    import_hf(
        tmp_path / "disc",
        tmp_path / "out",
        generator_dir=tmp_path / "gen",
        allow_unshared_embeddings=True,
    )
    assert (tmp_path / "out" / "model.pt").is_file()


def test_export_of_a_cased_vocabulary_without_tokenizer_config_stays_cased(tmp_path):
    """Imported from a directory that does not say whether it lower-cases: the export follows
    the vocabulary (upper-case entries: cased), as the plugin's own WordPiece does."""
    from transformers import AutoTokenizer

    from truneg_fairseq.convert.hf import export_hf, import_hf

    vocab = wordpiece_vocab() + ["The", "Paris", "P"]
    save_bert(tmp_path / "hf", vocab=vocab)
    for name in ("tokenizer_config.json", "tokenizer.json"):
        (tmp_path / "hf" / name).unlink(missing_ok=True)
    import_hf(tmp_path / "hf", tmp_path / "imp")
    assert json.loads((tmp_path / "imp" / "import.json").read_text())["lowercase"] is None
    export_hf(tmp_path / "imp" / "model.pt", tmp_path / "back")
    assert (
        json.loads((tmp_path / "back" / "tokenizer_config.json").read_text())["do_lower_case"]
        is False
    )
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "back"))
    assert tok.tokenize("The Paris") == ["The", "Paris"]


def test_fingerprints_identify_the_tokenizer_not_the_bytes_of_its_file(tmp_path):
    from utils import tiny_corpus_lines

    from truneg_fairseq.data import corpus
    from truneg_fairseq.text import (
        TokenizerError,
        TokenizerSpec,
        build_tokenizer,
        check_record,
        write_record,
    )

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(400)) + "\n")
    models = [
        corpus.train_sentencepiece(text, tmp_path / f"run{i}" / "spm", 120, "unigram")
        for i in (1, 2)
    ]
    assert (
        Path(models[0]).read_bytes() != Path(models[1]).read_bytes()
    )  # the trainer section differs
    prints = [
        build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(m))).fingerprint()
        for m in models
    ]
    assert prints[0] == prints[1]
    other = corpus.train_sentencepiece(text, tmp_path / "run3" / "spm", 140, "unigram")
    assert (
        build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(other))).fingerprint()
        != prints[0]
    )

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in wordpiece_vocab()))
    crlf = tmp_path / "crlf" / "vocab.txt"
    crlf.parent.mkdir()
    crlf.write_bytes(vocab.read_bytes().replace(b"\n", b"\r\n"))
    data = tmp_path / "data"
    data.mkdir()
    write_record(
        data, build_tokenizer(TokenizerSpec("wordpiece", vocab=str(vocab), lowercase=True))
    )
    check_record(
        data / "dict.txt",
        build_tokenizer(TokenizerSpec("wordpiece", vocab=str(crlf), lowercase=True)),
    )
    with pytest.raises(TokenizerError, match="lowercase"):
        check_record(
            data / "dict.txt",
            build_tokenizer(TokenizerSpec("wordpiece", vocab=str(crlf), lowercase=False)),
        )
    changed = tmp_path / "changed" / "vocab.txt"
    changed.parent.mkdir()
    changed.write_text("".join(t + "\n" for t in wordpiece_vocab()[:-1]))
    with pytest.raises(TokenizerError, match="is not the file that made"):
        check_record(
            data / "dict.txt",
            build_tokenizer(TokenizerSpec("wordpiece", vocab=str(changed), lowercase=True)),
        )


@pytest.mark.parametrize("lowercase,warned", [("no", True), ("yes", False)])
def test_unknown_token_rate_is_logged_and_a_high_one_is_a_warning(tmp_path, lowercase, warned):
    """An uncased vocabulary with --lowercase no turns every capitalised word into <unk>."""
    from utils import tiny_corpus_lines

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in wordpiece_vocab()))
    text = tmp_path / "text.txt"
    text.write_text("".join(line.capitalize() + "\n" for line in tiny_corpus_lines(300)))
    proc = run_script(
        "prepare_corpus.py",
        [
            "--input",
            str(text),
            "--output-dir",
            str(tmp_path / "work"),
            "--tokenizer",
            "wordpiece",
            "--vocab",
            str(vocab),
            "--lowercase",
            lowercase,
        ],
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert re.search(r"data-bin/train: \d+ of \d+ tokens \([\d.]+%\) are <unk>", out)
    assert ("WARNING" in out and "check --lowercase" in out) == warned


def test_a_second_prepare_corpus_on_the_same_output_is_refused_and_deletes_nothing(tmp_path):
    from utils import tiny_corpus_lines

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(200)) + "\n")
    out = tmp_path / "work"
    first = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert first.returncode == 0, first.stderr
    before = _snapshot(out)
    (tmp_path / ".work.lock").write_text("1")  # a run in progress (pid 1 is alive)
    second = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert second.returncode == 2 and "being written by another run (pid 1" in second.stderr
    assert _snapshot(out) == before


def _file_size_limit(limit: int):
    """preexec_fn: files larger than ``limit`` bytes cannot be written (EFBIG), as on a full disk."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_failed_prepare_corpus_rerun_leaves_the_earlier_outputs_whole(tmp_path):
    """The second run fails while training sentencepiece (its model file cannot be written):
    raw/, spm.*, tok/ and data-bin/ of the first run stay as they were, no staging leftovers, and
    the error says what happened instead of blaming a --spm-model flag never given."""
    from utils import tiny_corpus_lines

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(300)) + "\n")
    out = tmp_path / "work"
    first = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert first.returncode == 0, first.stderr
    before = _snapshot(out)
    other = tmp_path / "other.txt"
    other.write_text("\n".join(tiny_corpus_lines(400))[::-1] + "\n")  # another text: other outputs
    assert (
        other.stat().st_size < 60_000
    )  # raw/ fits under the limit, a sentencepiece model (~250 kB) does not
    second = run_script(
        "prepare_corpus.py",
        ["--input", str(other), "--output-dir", str(out), "--vocab-size", "100"],
        preexec_fn=_file_size_limit(100_000),
    )
    assert second.returncode == 2
    assert "sentencepiece training could not write its model in " + str(out) + " (" in second.stderr
    assert (
        "--spm-model" not in second.stderr.split("choose another")[0]
        and "Traceback" not in second.stderr
    )
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [
        ".truneg-output.json"
    ]


def test_prepare_corpus_never_replaces_entries_it_did_not_write(tmp_path):
    from utils import tiny_corpus_lines

    text = tmp_path / "text.txt"
    text.write_text("\n".join(tiny_corpus_lines(200)) + "\n")
    out = tmp_path / "work"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / "train.txt").write_text("my own data")  # where an output would go
    (out / "notes.txt").write_text("kept")
    proc = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert (
        proc.returncode == 2
        and str(out / "raw" / "train.txt") in proc.stderr
        and "Move" in proc.stderr
    )
    assert (out / "raw" / "train.txt").read_text() == "my own data"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "raw"]
    # other files beside the outputs, or inside their directories, are fine, and stay
    (out / "raw" / "train.txt").rename(out / "raw" / "mine.txt")
    proc = run_script(
        "prepare_corpus.py", ["--input", str(text), "--output-dir", str(out), "--vocab-size", "100"]
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "raw" / "mine.txt").read_text() == "my own data" and (
        out / "raw" / "train.txt"
    ).is_file()
    assert (out / "notes.txt").read_text() == "kept" and (out / "data-bin" / "dict.txt").is_file()
    record = json.loads((out / "data-bin" / "tokenizer_fingerprint.json").read_text())
    assert record["files"]["spm_model"]["path"] == str(
        out / "spm.model"
    )  # the final place, not the staging one


_ENTRIES = [f"e{i}" for i in range(300)]
_SWAPPER = """
import sys
from pathlib import Path
from truneg_fairseq.io_utils import staged_entries
out = Path(sys.argv[1])
names = [f"e{i}" for i in range(300)]
print("ready", flush=True)
with staged_entries(out, "a command", names) as stage:
    for n in names[:250]:  # the new set has fewer entries than the old one
        (stage / n).write_text("new")
print("done", flush=True)
"""


def _one_whole_set(out: Path) -> str:
    present = {n: (out / n).read_text() for n in _ENTRIES if (out / n).exists()}
    if set(present) == set(_ENTRIES) and set(present.values()) == {"old"}:
        return "old"
    if set(present) == set(_ENTRIES[:250]) and set(present.values()) == {"new"}:
        return "new"
    return f"mixed: {sorted(set(present.values()))}, {len(present)} entries"


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.01, 0.02, 0.04, 0.08])
def test_a_kill_during_a_staged_swap_leaves_one_whole_set_after_recovery(tmp_path, delay):
    import signal
    import subprocess
    import sys
    import time

    from truneg_fairseq.io_utils import staged_entries

    out = tmp_path / "out"
    with staged_entries(out, "a command", _ENTRIES) as stage:
        for n in _ENTRIES:
            (stage / n).write_text("old")
    (out / "mine.txt").write_text("not an output")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    messages = []
    with staged_entries(out, "a command", _ENTRIES, log=messages.append) as stage:
        assert _one_whole_set(out) in ("old", "new")  # recovered before anything is written
        (stage / "e0").write_text("next")
    assert (out / "e0").read_text() == "next" and (out / "mine.txt").read_text() == "not an output"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [
        ".truneg-output.json"
    ]


@pytest.mark.parametrize(
    "case",
    ["pickle_bin", "garbled_safetensors", "truncated_safetensors", "latin1_vocab", "shard_outside"],
)
def test_damaged_or_crafted_hf_files_are_one_error_naming_the_file(tmp_path, case):
    import pickle

    hf = tmp_path / "hf"
    save_bert(hf, vocab=wordpiece_vocab())
    weights = hf / "model.safetensors"
    named = weights
    if case == "pickle_bin":
        weights.unlink()
        named = hf / "pytorch_model.bin"

        class Payload:
            def __reduce__(self):
                return (open, (str(tmp_path / "PWNED"), "w"))

        named.write_bytes(pickle.dumps({"x": Payload()}))
    elif case == "garbled_safetensors":
        weights.write_bytes(b"\xff" * 64 + weights.read_bytes()[64:])
    elif case == "truncated_safetensors":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif case == "latin1_vocab":
        named = hf / "vocab.txt"
        named.write_bytes(named.read_bytes() + "caf\xe9\n".encode("latin-1"))
    else:
        weights.rename(tmp_path / "elsewhere.safetensors")
        named = hf / "model.safetensors.index.json"
        named.write_text(json.dumps({"weight_map": {"x": "../elsewhere.safetensors"}}))
    proc = run_script("convert_hf.py", ["import", str(hf), str(tmp_path / "out")])
    assert proc.returncode == 2, proc.stderr
    assert str(named) in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out").exists()


def test_an_output_that_cannot_be_written_is_one_error(imported, tmp_path):
    proc = run_script("convert_hf.py", ["import", str(imported / "hf"), "/proc/truneg-out/model"])
    assert proc.returncode == 2 and "/proc/truneg-out/model: cannot write there" in proc.stderr
    assert "Traceback" not in proc.stderr
    (tmp_path / "file").write_text("x")
    proc = run_script("convert_hf.py", ["import", str(imported / "hf"), str(tmp_path / "file")])
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr


@pytest.mark.parametrize(
    "script", ["evaluate_mlm.py", "convert_hf.py", "cline_hits.py", "squad_predict.py"]
)
@pytest.mark.parametrize("data", ["empty", "missing"])
def test_a_wrong_data_flag_is_named_not_the_recorded_directory(
    plain_checkpoint, data_bin, tmp_path, script, data
):
    """Every loading path resolves --data the same way: the error names the directory given."""
    given = tmp_path / data
    if data == "empty":
        given.mkdir()
    ck = str(plain_checkpoint)
    triplets = tmp_path / "t.tsv"
    triplets.write_text("a b c\ta b d\ta b e\n")
    args = {
        "evaluate_mlm.py": [ck, "--data", str(given)],
        "convert_hf.py": ["export", ck, str(tmp_path / "exported"), "--data", str(given)],
        "cline_hits.py": [
            ck,
            "--data",
            str(given),
            "--triplets",
            str(triplets),
            "--spm-model",
            str(data_bin.parent / "spm.model"),
        ],
        "squad_predict.py": [
            "--checkpoint",
            ck,
            "--data",
            str(given),
            "--output",
            str(tmp_path / "p.json"),
        ],
    }[script]
    proc = run_script(script, args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    want = (
        f"--data {given}: no such directory"
        if data == "missing"
        else f"--data {given} has no dict.txt"
    )
    assert want in proc.stderr and "Traceback" not in proc.stderr
    assert "recorded" not in proc.stderr and not (tmp_path / "exported").exists()


@pytest.mark.parametrize("command", ["import", "export"])
def test_a_full_disk_during_conversion_is_one_error_and_replaces_nothing(
    imported, plain_checkpoint, corpus_dir, tmp_path, command
):
    """Weight files that cannot be written (a file-size limit: EFBIG, as ENOSPC on a full disk)."""
    spm_model = corpus_dir / "spm.model"
    out = tmp_path / "out"
    args = (
        ["import", str(imported / "hf"), str(out)]
        if command == "import"
        else ["export", str(plain_checkpoint), str(out), "--spm-model", str(spm_model)]
    )
    proc = run_script("convert_hf.py", args, preexec_fn=_file_size_limit(20_000))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{out}: writing failed" in proc.stderr and "nothing was replaced" in proc.stderr
    assert "Traceback" not in proc.stderr and "inline_container" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no leftovers


def test_squad_windows_report_their_unknown_rate(caplog):
    import logging

    from truneg_fairseq.data.squad_windows import Feature
    from truneg_fairseq.tasks.squad import _report_unknown

    features = [Feature(0, [0, 5, 3, 2, 7, 3, 2], 4, []), Feature(1, [0, 5, 2, 7, 8, 9, 2], 3, [])]
    with caplog.at_level(logging.INFO):
        assert _report_unknown(features, 3, "dev.json") == pytest.approx(100 * 2 / 14)
    assert "dev.json: 2 of 14 tokens (14.3%) are <unk>: the tokenizer does not fit" in caplog.text
