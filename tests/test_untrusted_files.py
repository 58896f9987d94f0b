"""Files from outside run no code: a checkpoint of plain data whose config holds code where
fairseq evaluates a value, and a HuggingFace config.json whose values would reach a command line.
Each case runs the real scripts and asserts that the marker file the payload would create does
not appear and that the error names the file and the field."""

import json
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
@pytest.mark.parametrize("where,field", [("model", "encoder_xformers_att_config"), ("optimizer", "adam_betas")])
def test_checkpoint_config_with_code_is_refused_everywhere(plain_checkpoint, data_bin, tmp_path, where, field):
    marker = tmp_path / "PWNED"
    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", where, field, _payload(marker))
    runs = {
        "export": run_script("convert_hf.py", ["export", str(evil), str(tmp_path / "hf"), "--data", str(data_bin)]),
        "evaluate": run_script("evaluate_mlm.py", ["--data", str(data_bin), str(evil)]),
    }
    if where == "optimizer":  # fairseq-train builds its optimizer from the command line, not from here
        runs["restore"] = fairseq_train(data_bin, tmp_path / "ft", [*TINY_ROBERTA, "--criterion", "masked_lm",
                                        "--max-update", "1", "--restore-file", str(evil)], check=False)
    for name, proc in runs.items():
        assert not marker.exists(), name
        assert proc.returncode != 0, name
        assert f"cfg.{where}.{field}" in proc.stderr and "fairseq evaluates this field" in proc.stderr, name
        if name != "restore":
            assert "Traceback" not in proc.stderr, name
    assert not (tmp_path / "hf").exists()


def test_literal_values_still_load(plain_checkpoint, tmp_path):
    """A literal stays what it was: fairseq evaluates the literal's own repr."""
    import truneg_fairseq  # noqa: F401  (installs the check)
    from fairseq import checkpoint_utils

    path = _crafted(plain_checkpoint, tmp_path / "ok.pt", "optimizer", "adam_betas", " (0.9, 0.98)")
    state = checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert eval(state["cfg"].optimizer.adam_betas) == (0.9, 0.98)  # the literal, rewritten


@pytest.mark.parametrize("key,value", [
    ("hidden_dropout_prob", "--user-dir=EVILPKG"),
    ("num_hidden_layers", "--user-dir=EVILPKG"),
    ("layer_norm_eps", "__import__('os').system('touch MARKER')"),
    ("hidden_size", True),
    ("hidden_act", ["gelu"]),
])
def test_hf_config_values_are_type_checked_before_anything_is_built(tmp_path, key, value):
    vocab = wordpiece_vocab()
    hf = tmp_path / "hf"
    save_bert(hf, vocab=vocab)
    marker = tmp_path / "PWNED"
    pkg = hf / "evilpkg"  # shipped inside the downloaded directory
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    config = json.loads((hf / "config.json").read_text())
    text = value.replace("EVILPKG", str(pkg)).replace("MARKER", str(marker)) if isinstance(value, str) else value
    config[key] = text
    (hf / "config.json").write_text(json.dumps(config))
    proc = run_script("convert_hf.py", ["import", str(hf), str(tmp_path / "out")], cwd=str(tmp_path))
    assert not marker.exists()
    assert proc.returncode == 2
    assert f"{hf / 'config.json'}: {key} must be" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
