"""Files from outside run no code: a checkpoint of plain data whose config holds code where
fairseq evaluates a value, and a HuggingFace config.json whose values would reach a command line.
Each case runs the real scripts and asserts that the marker file the payload would create does
not appear and that the error names the file and the field. A checkpoint pickled with numpy
1.x's names loads, and pickles calling ``os.system`` or ``eval`` are refused by ``torch.load``."""

import json
import os
import re
from pathlib import Path

import pytest
import torch
from command_runs import run_script
from fairseq_runs import TINY_ROBERTA, fairseq_train
from hf_fixtures import save_bert, wordpiece_vocab


def _payload(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}') or None"


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


def _save_as_numpy1(obj, path):
    """torch.save ``obj`` with numpy's internals named as numpy 1.x pickles name them
    (``numpy.core.multiarray.*``), whatever numpy is installed."""
    import pickle
    import types

    import numpy as np
    import torch

    core = getattr(np, "_core", None) or np.core
    renamed = {
        id(core.multiarray.scalar): b"scalar",
        id(core.multiarray._reconstruct): b"_reconstruct",
    }

    class Numpy1Pickler(pickle._Pickler):
        def save_global(self, obj, name=None):
            if id(obj) in renamed:
                self.write(pickle.GLOBAL + b"numpy.core.multiarray\n" + renamed[id(obj)] + b"\n")
                self.memoize(obj)
            else:
                super().save_global(obj, name)

        dispatch = dict(pickle._Pickler.dispatch)

    Numpy1Pickler.dispatch[types.BuiltinFunctionType] = Numpy1Pickler.save_global
    module = types.SimpleNamespace(Pickler=Numpy1Pickler, __name__="numpy1_pickle")
    torch.save(obj, path, pickle_module=module)


def test_numpy1_checkpoint_loads_and_crafted_pickle_is_refused(tmp_path):
    import argparse
    import pickle
    import zipfile

    import numpy as np
    import torch

    import truneg_fairseq  # noqa: F401  (installs the allow-list, as --user-dir does)

    ckpt = {
        "args": argparse.Namespace(lr=[0.1]),
        "model": {"w": torch.arange(3.0)},
        "extra_state": {"best": np.float64(0.25), "scores": np.arange(3), "n": np.int64(7)},
    }
    path = tmp_path / "numpy1.pt"
    _save_as_numpy1(ckpt, path)
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    assert b"numpy.core.multiarray\nscalar" in pkl and b"numpy._core" not in pkl
    state = torch.load(path, map_location="cpu")  # weights_only, as fairseq's resume calls it
    assert state["extra_state"]["best"] == 0.25 and state["extra_state"]["n"] == 7
    assert state["extra_state"]["scores"].tolist() == [0, 1, 2] and state["args"].lr == [0.1]

    class Evil:
        def __reduce__(self):
            return os.system, ("touch " + str(tmp_path / "pwned"),)

    class Sneaky:
        def __reduce__(self):
            return eval, ("1 + 1",)

    for payload in (Evil(), Sneaky()):
        bad = tmp_path / "bad.pt"
        torch.save({"model": {}, "extra_state": payload}, bad)
        with pytest.raises(pickle.UnpicklingError):
            torch.load(bad, map_location="cpu")
    assert not (tmp_path / "pwned").exists()


def _string_fields(count: int) -> list:
    """(group, field) of ``count`` string fields of fairseq's top-level config groups."""
    import dataclasses

    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.dataclass.utils import interpret_dc_type

    out = []
    for group, f in FairseqConfig.__dataclass_fields__.items():
        if dataclasses.is_dataclass(f.type):
            for name, field in f.type.__dataclass_fields__.items():
                if not name.startswith("_") and interpret_dc_type(field.type) is str:
                    out.append((group, name))
    return out[:count]


def _standing_for_much(state: dict, form: str) -> str:
    """``state`` with a config that stands for exponentially more than the file holds, in
    ``form``; returns the start of the dotted path to be named."""
    shared = [0] * 8
    for _ in range(10):  # stored once, 8**11 values when copied
        shared = [shared] * 8
    if form == "references":  # each value two references to the last: 2**40 values resolved
        common = state["cfg"]["common"]
        common["l0"] = [0, 0]
        for i in range(1, 40):
            common[f"l{i}"] = [f"${{common.l{i - 1}}}", f"${{common.l{i - 1}}}"]
        return "cfg.common"
    if form == "shared":
        state["cfg"]["common"]["shared"] = shared
        return "cfg.common.shared"
    if form == "namespace":  # fairseq keeps a legacy model's arguments as a namespace
        state["cfg"]["model"].shared = shared
        return "cfg.model.shared"
    args = _old_style(state)
    if form == "args-shared":
        args.lr = shared
        return "args.lr"
    # each string field two interpolations of the last: fairseq's conversion of the arguments
    # resolves them (2**30 characters)
    fields = _string_fields(30)
    setattr(args, fields[0][1], "ab")
    for (group, name), (last_group, last) in zip(fields[1:], fields):
        setattr(args, name, f"${{{last_group}.{last}}}${{{last_group}.{last}}}")
    return "args."


SWOLLEN = ["references", "shared", "namespace", "args-shared", "args-interpolations"]


@pytest.mark.parametrize("form", SWOLLEN)
def test_a_config_standing_for_exponentially_much_is_refused_at_once(
    plain_checkpoint, data_bin, tmp_path, form
):
    """A config a few hundred bytes long that stands for 2**40 values (references doubling the
    last, one list stored once and used over and over, in a dict, a namespace, an old-style
    ``args``) is refused in well under a second by fairseq's loader (fairseq-validate,
    fairseq-train --restore-file, fairseq's hub) and the plugin's, naming the file and where;
    building or resolving it first would take hours."""
    import time

    from fairseq import checkpoint_utils

    import truneg_fairseq  # noqa: F401  (installs the checks)
    from truneg_fairseq.checkpoints import CheckpointError, read_checkpoint
    from truneg_fairseq.compat import UnsafeCheckpointError

    state = torch.load(plain_checkpoint, map_location="cpu", weights_only=True)
    where = _standing_for_much(state, form)
    swollen = tmp_path / "swollen.pt"
    torch.save(state, swollen)
    assert swollen.stat().st_size < plain_checkpoint.stat().st_size + 20_000
    start = time.time()
    with pytest.raises(UnsafeCheckpointError) as e:
        checkpoint_utils.load_checkpoint_to_cpu(str(swollen), arg_overrides={"data": "x"})
    assert time.time() - start < 1.0
    assert str(e.value).startswith(f"{swollen}: {where}") and "was not loaded" in str(e.value)
    start = time.time()
    with pytest.raises(CheckpointError, match=re.escape(f"{swollen}: {where}")):
        read_checkpoint(swollen)
    assert time.time() - start < 1.0
    if form == "references":
        proc = run_script("evaluate_mlm.py", ["--data", str(data_bin), str(swollen)])
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert f"{swollen}: {where}" in proc.stderr


@pytest.mark.parametrize("form", ["dict", "dictconfig", "dataclass"])
def test_every_form_of_a_config_is_bounded_before_it_is_resolved(form):
    """The rebuild itself bounds a config handed to it in any form: references doubling the
    last in a dict or a ``DictConfig`` (which it would resolve), a list used over and over in a
    dataclass instance."""
    import time

    from fairseq.dataclass.configs import FairseqConfig
    from omegaconf import OmegaConf

    from truneg_fairseq.compat import UnsafeCheckpointError, rebuild_config

    common = {"l0": [0, 0]}
    for i in range(1, 40):
        common[f"l{i}"] = [f"${{common.l{i - 1}}}", f"${{common.l{i - 1}}}"]
    if form == "dataclass":
        shared = [0.1] * 8
        for _ in range(10):
            shared = [shared] * 8
        cfg = FairseqConfig()
        cfg.optimization.lr = shared
    else:
        cfg = {"common": common}
        cfg = OmegaConf.create(cfg) if form == "dictconfig" else cfg
    start = time.time()
    with pytest.raises(UnsafeCheckpointError, match=r"^f\.pt: cfg\.(common|optimization\.lr)"):
        rebuild_config(cfg, "f.pt")
    assert time.time() - start < 1.0


@pytest.mark.parametrize(
    "text",
    [
        "'a'*99999+" * 800 + "'a'",
        "[0]*99999+" * 300 + "[0]",
        "[[0]*1000]*1000",
        "(('a'*50000,)*2,)*2",
        "'a'*" + "9" * 200_000,
    ],
    ids=["strings-added", "lists-added", "nested-repeat", "tuples-repeated", "long-text"],
)
def test_a_value_fairseq_evaluates_is_bounded_after_every_step(text):
    """Sums and repetitions of plain data are bounded by their running size after each ``+``
    and ``*`` (items, nested ones and characters counted), so none builds more than 100,000
    items or copies more at a step; fairseq's own defaults still pass."""
    import time

    from truneg_fairseq.compat import UnsafeCheckpointError, safe_literal

    start = time.time()
    with pytest.raises(UnsafeCheckpointError, match="fairseq evaluates this field"):
        safe_literal(text, "f")
    assert time.time() - start < 0.5
    wav2vec = "[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2"
    assert eval(safe_literal(wav2vec, "f")) == eval(wav2vec)
