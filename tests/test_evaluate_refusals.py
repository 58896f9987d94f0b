"""evaluate_mlm on text that is not UTF-8, a checkpoint naming an unknown activation, a truncated
checkpoint or data of another dictionary: one error each."""

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


@pytest.mark.slow
def test_evaluate_mlm_names_truncated_checkpoint_and_other_dictionary(data_bin, tmp_path):
    from corpus_fixtures import make_corpus, tiny_corpus_lines
    from fairseq_runs import TINY_ROBERTA, fairseq_train

    fairseq_train(
        data_bin, tmp_path / "run", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    )
    ck = tmp_path / "run" / "checkpoint_last.pt"
    trunc = tmp_path / "truncated.pt"
    trunc.write_bytes(ck.read_bytes()[: ck.stat().st_size // 3])
    proc = run_script("evaluate_mlm.py", ["--data", str(data_bin), str(trunc)])
    assert proc.returncode == 2 and str(trunc) in proc.stderr and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr
    other = make_corpus(tmp_path / "other", tiny_corpus_lines(400, seed=5), vocab_size=120)
    proc = run_script("evaluate_mlm.py", ["--data", str(other), str(ck)])
    assert (
        proc.returncode == 2
        and f"--data {other}: its dict.txt is not the dictionary {ck} was trained with"
        in proc.stderr
    ), proc.stderr[-2000:]
    assert "Leave --data out" in proc.stderr and "size mismatch" not in proc.stderr
    assert "Traceback" not in proc.stderr
