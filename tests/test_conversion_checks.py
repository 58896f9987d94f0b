"""HuggingFace import and export checks: config sizes against the weights (more layers in the
weights than in config.json), non-finite weights, progress on a large model, another dictionary,
a truncated or old-style checkpoint, a generator whose embeddings differ from the
discriminator's, damaged or crafted HF files and an output that cannot be written (one error
naming the file)."""

import json
import re
import shutil

import pytest
from command_runs import run_script
from hf_fixtures import save_bert, wordpiece_vocab


def _edited_copy(src, dst, config=None, tensor=None):
    """A copy of HF directory ``src`` with config.json values and one tensor changed."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    if config:
        cfg = json.loads((dst / "config.json").read_text())
        cfg.update(config)
        (dst / "config.json").write_text(json.dumps(cfg))
    if tensor:
        name, edit = tensor
        state = load_file(str(dst / "model.safetensors"))
        edit(state[name])
        save_file(state, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


@pytest.mark.parametrize(
    "config, match",
    [
        ({"num_hidden_layers": 100000}, r"num_hidden_layers is 100000 but the weights have 2"),
        ({"num_hidden_layers": 1}, r"num_hidden_layers is 1 but the weights have 2"),
        (
            {"hidden_size": 64, "num_attention_heads": 2},
            r"hidden_size is 64 but the weights have 32 \(word embedding width",
        ),
        ({"intermediate_size": 128}, r"intermediate_size is 128 but the weights have 64"),
        ({"vocab_size": 7}, r"vocab_size is 7 but the weights have \d+ \(word embedding rows"),
        (
            {"max_position_embeddings": 512},
            r"max_position_embeddings is 512 but the weights have 64",
        ),
        ({"num_attention_heads": 3}, r"num_attention_heads 3 does not divide hidden_size 32"),
        ({"num_attention_heads": 0}, r"num_attention_heads is 0; it must be at least 1"),
    ],
)
def test_config_sizes_are_checked_against_the_weights_before_a_model_is_built(
    hf_bert_dir, tmp_path, config, match
):
    import time

    from truneg_fairseq.convert.hf import ConversionError, import_hf

    hf = _edited_copy(hf_bert_dir, tmp_path / "hf", config=config)
    start = time.monotonic()
    with pytest.raises(ConversionError, match=r"config\.json: " + match):
        import_hf(hf, tmp_path / "out")
    assert time.monotonic() - start < 10  # at once: nothing of that size was built
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_holding_nan_or_inf_are_refused_naming_the_tensor(hf_bert_dir, tmp_path, value):
    from truneg_fairseq.convert.hf import ConversionError, import_hf

    name = "bert.encoder.layer.1.output.dense.weight"
    hf = _edited_copy(
        hf_bert_dir, tmp_path / "hf", tensor=(name, lambda t: t.view(-1)[3:5].fill_(value))
    )
    kind = "NaN" if value != value else "infinite"
    with pytest.raises(ConversionError, match=rf"tensor {name} holds 2 {kind} value"):
        import_hf(hf, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_checkpoint_with_non_finite_weights(imported_bert, tmp_path):
    import torch

    from truneg_fairseq.convert.hf import ConversionError, export_hf

    shutil.copytree(imported_bert, tmp_path / "imp")
    ckpt = tmp_path / "imp" / "model.pt"
    state = torch.load(ckpt, weights_only=False)
    name = "encoder.sentence_encoder.layers.0.fc1.weight"
    state["model"][name][0, 0] = float("nan")
    state["cfg"]["task"]["data"] = str(tmp_path / "imp")
    torch.save(state, ckpt)
    with pytest.raises(ConversionError, match=rf"model\.pt: tensor {name} holds 1 NaN"):
        export_hf(ckpt, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_conversion_of_a_large_model_logs_progress(hf_bert_dir, tmp_path, monkeypatch, caplog):
    import truneg_fairseq.convert.checks as checks
    from truneg_fairseq.convert.hf import import_hf

    monkeypatch.setattr(checks, "PROGRESS_EVERY", 10)
    with caplog.at_level("INFO", logger="truneg_fairseq.convert.checks"):
        import_hf(hf_bert_dir, tmp_path / "out")
    assert re.search(r"bert: 10 of \d+ tensors checked", caplog.text)


def _foreign_dict(imported_bert, tmp_path, same_size=True):
    """A data directory whose dict.txt is another dictionary (of the same size: only the
    symbols differ)."""
    lines = (imported_bert / "dict.txt").read_text().splitlines()
    other = tmp_path / "other"
    other.mkdir()
    lines = [f"x{i} 1" for i in range(len(lines))] if same_size else lines[:-5]
    (other / "dict.txt").write_text("\n".join(lines) + "\n")
    return other


def test_export_with_another_dictionary_of_the_same_size_is_refused(imported_bert, tmp_path):
    from truneg_fairseq.checkpoints import CheckpointError
    from truneg_fairseq.convert.hf import export_hf

    other = _foreign_dict(imported_bert, tmp_path)
    with pytest.raises(
        CheckpointError, match=r"--data .*other: its dict.txt is not the dictionary"
    ):
        export_hf(imported_bert / "model.pt", tmp_path / "hf", data=str(other))
    assert not (tmp_path / "hf").exists()


def test_a_data_directory_whose_dict_is_no_fairseq_dictionary_is_one_error(
    imported_bert, hf_bert_dir, tmp_path
):
    """The checkpoint's recorded directory moved away, and --data names the HF directory (its
    vocab.txt copied as dict.txt: one token a line, no counts)."""
    import torch

    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference

    shutil.copytree(imported_bert, tmp_path / "moved")
    (tmp_path / "moved" / "dict.txt").unlink()
    state = torch.load(tmp_path / "moved" / "model.pt", weights_only=False)
    state["cfg"]["task"]["data"] = str(tmp_path / "gone")  # the recorded directory moved away
    torch.save(state, tmp_path / "moved" / "model.pt")
    data = tmp_path / "hfdata"
    data.mkdir()
    (data / "dict.txt").write_text("[PAD]\n[UNK]\nthe the\n")
    with pytest.raises(CheckpointError, match=r"hfdata/dict.txt is not a fairseq dictionary"):
        load_for_inference(tmp_path / "moved" / "model.pt", str(data))


def test_convert_hf_export_of_a_truncated_checkpoint_is_one_line(imported_bert, tmp_path):
    from command_runs import run_script

    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes((imported_bert / "model.pt").read_bytes()[:5000])
    proc = run_script("convert_hf.py", ["export", str(ckpt), str(tmp_path / "hf")])
    assert proc.returncode == 2
    assert "model.pt is not a readable checkpoint: truncated or corrupt" in proc.stderr
    assert "Traceback" not in proc.stderr


def _old_style(imported_bert, ckpt, recorded):
    """``imported_bert``'s model saved as fairseq saved checkpoints before its configs: an ``args``
    namespace (recording ``recorded`` as its data directory), no ``cfg``."""
    import torch
    from fairseq import options

    import truneg_fairseq  # noqa: F401  (registration)

    sizes = json.loads((imported_bert / "import.json").read_text())["model_args"]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser, [str(recorded), "--cpu", "--task", "masked_lm", "--arch", "bert_hf"]
    )
    for key, value in sizes.items():
        setattr(args, key, value)
    state = torch.load(imported_bert / "model.pt", weights_only=False)
    old = {k: v for k, v in state.items() if k != "cfg"}
    torch.save(dict(old, args=args), ckpt)


def test_an_old_style_checkpoint_honours_data(imported_bert, tmp_path):
    from truneg_fairseq.checkpoints import load_for_inference

    ckpt = tmp_path / "old.pt"
    gone = tmp_path / "moved-away"
    _old_style(imported_bert, ckpt, gone)
    models, cfg, task = load_for_inference(ckpt, str(imported_bert))
    assert cfg.task.data == str(imported_bert)
    symbols = [line.split()[0] for line in (imported_bert / "dict.txt").read_text().splitlines()]
    assert task.source_dictionary.symbols[4 : 4 + len(symbols)] == symbols
    # the recorded directory in place, with another dictionary: --data is honoured, or refused
    gone.mkdir()
    (gone / "dict.txt").write_text("".join(f"w{i} 1\n" for i in range(5)))
    with pytest.raises(Exception, match="not the dictionary"):
        load_for_inference(ckpt, str(imported_bert))


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


def test_an_output_that_cannot_be_written_is_one_error(imported_wordpiece, tmp_path):
    proc = run_script(
        "convert_hf.py", ["import", str(imported_wordpiece / "hf"), "/proc/truneg-out/model"]
    )
    assert proc.returncode == 2 and "/proc/truneg-out/model: cannot write there" in proc.stderr
    assert "Traceback" not in proc.stderr
    (tmp_path / "file").write_text("x")
    proc = run_script(
        "convert_hf.py", ["import", str(imported_wordpiece / "hf"), str(tmp_path / "file")]
    )
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr
