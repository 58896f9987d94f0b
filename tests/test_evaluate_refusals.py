"""evaluate_mlm on text that is not UTF-8 or a checkpoint naming an unknown activation: one
error each."""

import pytest
import torch
from command_runs import run_script

# ---- evaluate_mlm -------------------------------------------------------------------------


def test_evaluate_mlm_on_latin1_text_is_one_error_naming_the_line(imported_bert, tmp_path):
    text = tmp_path / "latin1.txt"
    text.write_bytes("the farmer will stay .\nthe caf\xe9 is big .\n".encode("latin-1"))
    proc = run_script("evaluate_mlm.py", ["--text", str(text), str(imported_bert / "model.pt")])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"--text {text}, line 2: not UTF-8" in proc.stderr and "iconv" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def electra_discriminator(tmp_path_factory):
    from hf_fixtures import save_electra_pair

    from truneg_fairseq.convert.hf import import_hf

    root = tmp_path_factory.mktemp("el3")
    save_electra_pair(root / "disc", root / "gen")
    return import_hf(root / "disc", root / "imported_bert")


@pytest.mark.parametrize(
    "source, field",
    [("imported_bert", "activation_fn"), ("electra_discriminator", "electra_activation_fn")],
)
def test_evaluate_mlm_on_an_unknown_activation_is_one_error(request, tmp_path, source, field):
    imported_bert = request.getfixturevalue(source)
    state = torch.load(imported_bert / "model.pt", weights_only=False)
    model = state["cfg"]["model"]
    if isinstance(model, dict):
        model[field] = "swishy"
    else:
        setattr(model, field, "swishy")  # a legacy model: an argparse namespace
    ck = tmp_path / "model.pt"
    torch.save(state, ck)
    proc = run_script("evaluate_mlm.py", ["--data", str(imported_bert), str(ck)])
    assert proc.returncode == 2, proc.stderr[-2000:]
    # one error naming the checkpoint and the value (the model-values check of the plugin's
    # families, or the config rebuilt from fairseq's schema, which names the field's choices)
    assert proc.stderr.count("error:") == 1 and f"{ck}" in proc.stderr, proc.stderr
    assert (
        f"{ck} records the activation function 'swishy', which fairseq does not know"
        in (proc.stderr)
        or f"{field} is 'swishy', not one of" in proc.stderr
    )
    assert "gelu" in proc.stderr and "Traceback" not in proc.stderr
