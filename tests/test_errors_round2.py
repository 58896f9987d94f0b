"""Inputs and failures that once ended in a traceback or a silently wrong result, each now one
clear error (or handled): output locks and markers, full disks, synonym tables, GLUE and SQuAD
preparation, HuggingFace import and export, old-style checkpoints, CR-only text files."""

import contextlib
import json
import re
import resource
import shutil
import subprocess

import numpy as np
import pytest

from truneg_fairseq.errors import OutputDirError, SynonymTableError
from truneg_fairseq.io_utils import MARKER, atomic_dir, output_lock, staged_entries


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Files of this process larger than ``limit`` bytes cannot be written (EFBIG, as on a full
    disk; Python ignores SIGXFSZ), for the ``with`` block only."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


# ---- output locks and markers -------------------------------------------------------------


@contextlib.contextmanager
def immutable(path):
    """``path`` made immutable (chattr +i: not even root may remove it); skipped where chattr
    is missing or the filesystem has no such flag."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("kind", ["output_lock", "atomic_dir"])
def test_a_lock_file_that_cannot_be_removed_is_one_error_naming_it(tmp_path, kind):
    lock = tmp_path / ".out.lock"
    lock.write_text("999999999")  # the lock of a run that ended, left read-only (immutable)
    with immutable(lock):
        with pytest.raises(OutputDirError, match=r"\.out\.lock.*remove .* by hand"):
            ctx = output_lock(tmp_path / "out") if kind == "output_lock" else None
            with ctx or atomic_dir(tmp_path / "out", "a command"):
                pass
    assert not (tmp_path / "out").exists()


def test_a_marker_nested_past_the_json_parser_is_one_error(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_text("[" * 100_000 + "]" * 100_000)
    for ctx in (atomic_dir(out, "a command"), staged_entries(out, "a command", ["a.txt"])):
        with pytest.raises(OutputDirError, match="not readable JSON .nested too deeply"):
            with ctx as stage:
                (stage / "a.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [MARKER]


@pytest.mark.parametrize("marker", ["[1, 2]", '"text"', "null", '{"files": 3}'])
def test_a_staged_marker_that_is_no_object_stops_the_recovery_with_one_error(tmp_path, marker):
    out = tmp_path / "out"
    with atomic_dir(out, "a command") as stage:
        (stage / "a.txt").write_text("old")
    # what a run killed during its swap leaves, but with a marker that is not ours
    (tmp_path / ".out.old-1").mkdir()
    (tmp_path / ".out.new-1").mkdir()
    (tmp_path / ".out.new-1" / MARKER).write_text(marker)
    with pytest.raises(OutputDirError, match=r"\.out\.new-1.*not a marker of this project"):
        with atomic_dir(out, "a command") as stage:
            (stage / "a.txt").write_text("new")
    assert (out / "a.txt").read_text() == "old"


# ---- synonym tables -----------------------------------------------------------------------


def _table(n_pairs=20000, n_symbols=50000):
    from truneg_fairseq.lexicon import SynonymTable

    rng = np.random.default_rng(0)
    pairs = np.unique(rng.integers(0, n_symbols, size=(n_pairs, 2)), axis=0)
    table = SynonymTable.empty(["w%d" % i for i in range(n_symbols)])
    table.pairs = pairs.astype(np.int64)
    return table


def test_a_full_disk_while_saving_a_synonym_table_is_one_error_and_no_file(tmp_path):
    path = tmp_path / "synonyms.npz"
    table = _table()
    with file_size_limit(16 * 1024):
        with pytest.raises(SynonymTableError, match=r"synonyms\.npz: writing failed .*free space"):
            table.save(path)
    assert list(tmp_path.iterdir()) == []
    table.save(path)  # and with space, the same call writes it
    assert len(type(table).load(path)) == len(table)


def _write_table(path, meta, **arrays):
    arrays.setdefault("pairs", np.zeros((1, 2), np.int64))
    arrays.setdefault("continuation_ids", np.zeros(0, np.int64))
    np.savez(path, meta=np.asarray(json.dumps(meta)), **arrays)


FP = "ab" * 32


@pytest.mark.parametrize(
    "meta, match",
    [
        ([1, 2], "meta record is a JSON list, not an object"),
        ({"format_version": 1, "num_symbols": "many", "fingerprint": FP}, "num_symbols is 'many'"),
        ({"format_version": 1, "num_symbols": 10.5, "fingerprint": FP}, "num_symbols is 10.5"),
        ({"format_version": 1, "num_symbols": 10, "fingerprint": 7}, "fingerprint is 7"),
        ({"format_version": "1", "num_symbols": 10, "fingerprint": FP}, "table format '1'"),
    ],
)
def test_a_synonym_table_meta_record_of_wrong_types_is_one_error(tmp_path, meta, match):
    from truneg_fairseq.lexicon import SynonymTable

    path = tmp_path / "t.npz"
    _write_table(path, meta)
    with pytest.raises(SynonymTableError, match=match):
        SynonymTable.load(path)


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"pairs": np.array([[0.5, 1.0]])}, "pairs array is float64"),
        ({"pairs": np.array([[0, 99]])}, "ids outside the dictionary's 10 entries"),
        ({"continuation_ids": np.array([-1])}, "continuation_ids hold ids outside"),
    ],
)
def test_synonym_table_arrays_of_wrong_types_or_ids_are_one_error(tmp_path, arrays, match):
    from truneg_fairseq.lexicon import SynonymTable

    path = tmp_path / "t.npz"
    _write_table(path, {"format_version": 1, "num_symbols": 10, "fingerprint": FP}, **arrays)
    with pytest.raises(SynonymTableError, match=match):
        SynonymTable.load(path)


# ---- GLUE preparation ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def spm_tokenizer(corpus_dir):
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer

    return build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model")))


def _rte(root, train_labels, dev_labels, newline="\n"):
    from glue_fixtures import SENTS

    d = root / "RTE"
    d.mkdir(parents=True, exist_ok=True)
    for name, labels in (("train.tsv", train_labels), ("dev.tsv", dev_labels)):
        rows = ["index\tsentence1\tsentence2\tlabel"] + [
            f"{i}\t{SENTS[i % 8]}\t{SENTS[(i + 3) % 8]}\t{label}" for i, label in enumerate(labels)
        ]
        (d / name).write_bytes((newline.join(rows) + newline).encode())
    return root


def test_a_dev_label_never_seen_in_train_is_one_error_naming_file_and_label(
    tmp_path, spm_tokenizer, data_bin
):
    from truneg_fairseq.data.glue import TASKS, prepare_task
    from truneg_fairseq.errors import CorpusError

    glue = _rte(tmp_path / "glue", ["entailment"] * 12, ["entailment", "not_entailment"] * 4)
    with pytest.raises(CorpusError, match=r"RTE/dev\.tsv: label 'not_entailment' of 4 rows never"):
        prepare_task(TASKS["RTE"], glue, tmp_path / "out", spm_tokenizer, data_bin / "dict.txt")
    assert not (tmp_path / "out" / "RTE").exists()


def test_a_glue_folder_with_some_tasks_prepares_those_and_logs_the_rest(tmp_path, caplog):
    from truneg_fairseq.data.glue import select_tasks
    from truneg_fairseq.errors import CorpusError

    glue = _rte(tmp_path / "glue", ["entailment", "not_entailment"] * 6, ["entailment"] * 4)
    with caplog.at_level("INFO", logger="truneg_fairseq.data.glue"):
        assert select_tasks(glue) == ["RTE"]
    assert "preparing RTE; skipped (no folder there): CoLA, SST-2" in caplog.text
    assert select_tasks(glue, ["RTE", "CoLA"]) == ["RTE", "CoLA"]  # asked for: never skipped
    with pytest.raises(CorpusError, match="holds none of the GLUE task folders"):
        select_tasks(tmp_path)


def test_an_explicitly_requested_missing_task_stays_an_error(tmp_path, spm_tokenizer, data_bin):
    from truneg_fairseq.data.glue import TASKS, prepare_task
    from truneg_fairseq.errors import CorpusError

    glue = _rte(tmp_path / "glue", ["entailment", "not_entailment"] * 6, ["entailment"] * 4)
    with pytest.raises(CorpusError, match=r"CoLA: .*CoLA/train\.tsv not found"):
        prepare_task(TASKS["CoLA"], glue, tmp_path / "out", spm_tokenizer, data_bin / "dict.txt")


def test_glue_files_with_cr_only_line_endings_are_read_as_lines(tmp_path):
    from truneg_fairseq.data.glue import TASKS, read_split_counted

    glue = _rte(tmp_path, ["entailment", "not_entailment"] * 6, ["entailment"] * 4, newline="\r")
    exs, skipped = read_split_counted(TASKS["RTE"], glue / "RTE" / "train.tsv")
    assert len(exs) == 12 and not skipped
    assert exs[1].label == "not_entailment" and exs[0].text1.startswith("the farmer")


def test_glue_output_under_a_comma_is_binarized_with_every_split(
    tmp_path, spm_tokenizer, data_bin, monkeypatch, caplog
):
    import truneg_fairseq.data.glue as glue_mod

    glue = _rte(tmp_path / "glue", ["entailment", "not_entailment"] * 6, ["entailment"] * 4)
    out = tmp_path / "runs,v2" / "glue-bin"
    monkeypatch.setattr(glue_mod, "PROGRESS_EVERY", 5)  # long input: progress lines
    with caplog.at_level("INFO", logger="truneg_fairseq.data.glue"):
        glue_mod.prepare_task(
            glue_mod.TASKS["RTE"], glue, out, spm_tokenizer, data_bin / "dict.txt"
        )
    for sub in ("input0", "input1", "label"):
        assert (out / "RTE" / sub / "valid.bin").is_file(), sub
    assert sorted(p.name for p in (out / "RTE").iterdir()) == [
        ".truneg-output.json",
        "input0",
        "input1",
        "label",
        "meta.json",
    ]
    assert "RTE train.tsv: 10 of 12 rows checked" in caplog.text
    assert "RTE train: 10 of 12 texts tokenized" in caplog.text


# ---- HuggingFace import and export --------------------------------------------------------


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    from hf_fixtures import save_bert

    root = tmp_path_factory.mktemp("hf")
    save_bert(root / "bert")
    return root / "bert"


@pytest.fixture(scope="module")
def imported(bert_dir, tmp_path_factory):
    from truneg_fairseq.convert.hf import import_hf

    return import_hf(bert_dir, tmp_path_factory.mktemp("imp") / "imported")


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
    bert_dir, tmp_path, config, match
):
    import time

    from truneg_fairseq.convert.hf import ConversionError, import_hf

    hf = _edited_copy(bert_dir, tmp_path / "hf", config=config)
    start = time.monotonic()
    with pytest.raises(ConversionError, match=r"config\.json: " + match):
        import_hf(hf, tmp_path / "out")
    assert time.monotonic() - start < 10  # at once: nothing of that size was built
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_holding_nan_or_inf_are_refused_naming_the_tensor(bert_dir, tmp_path, value):
    from truneg_fairseq.convert.hf import ConversionError, import_hf

    name = "bert.encoder.layer.1.output.dense.weight"
    hf = _edited_copy(
        bert_dir, tmp_path / "hf", tensor=(name, lambda t: t.view(-1)[3:5].fill_(value))
    )
    kind = "NaN" if value != value else "infinite"
    with pytest.raises(ConversionError, match=rf"tensor {name} holds 2 {kind} value"):
        import_hf(hf, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_checkpoint_with_non_finite_weights(imported, tmp_path):
    import torch

    from truneg_fairseq.convert.hf import ConversionError, export_hf

    shutil.copytree(imported, tmp_path / "imp")
    ckpt = tmp_path / "imp" / "model.pt"
    state = torch.load(ckpt, weights_only=False)
    name = "encoder.sentence_encoder.layers.0.fc1.weight"
    state["model"][name][0, 0] = float("nan")
    state["cfg"]["task"]["data"] = str(tmp_path / "imp")
    torch.save(state, ckpt)
    with pytest.raises(ConversionError, match=rf"model\.pt: tensor {name} holds 1 NaN"):
        export_hf(ckpt, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_conversion_of_a_large_model_logs_progress(bert_dir, tmp_path, monkeypatch, caplog):
    import truneg_fairseq.convert.checks as checks
    from truneg_fairseq.convert.hf import import_hf

    monkeypatch.setattr(checks, "PROGRESS_EVERY", 10)
    with caplog.at_level("INFO", logger="truneg_fairseq.convert.checks"):
        import_hf(bert_dir, tmp_path / "out")
    assert re.search(r"bert: 10 of \d+ tensors checked", caplog.text)


def _foreign_dict(imported, tmp_path, same_size=True):
    """A data directory whose dict.txt is another dictionary (of the same size: only the
    symbols differ)."""
    lines = (imported / "dict.txt").read_text().splitlines()
    other = tmp_path / "other"
    other.mkdir()
    lines = [f"x{i} 1" for i in range(len(lines))] if same_size else lines[:-5]
    (other / "dict.txt").write_text("\n".join(lines) + "\n")
    return other


def test_export_with_another_dictionary_of_the_same_size_is_refused(imported, tmp_path):
    from truneg_fairseq.checkpoints import CheckpointError
    from truneg_fairseq.convert.hf import export_hf

    other = _foreign_dict(imported, tmp_path)
    with pytest.raises(
        CheckpointError, match=r"--data .*other: its dict.txt is not the dictionary"
    ):
        export_hf(imported / "model.pt", tmp_path / "hf", data=str(other))
    assert not (tmp_path / "hf").exists()


def test_a_data_directory_whose_dict_is_no_fairseq_dictionary_is_one_error(
    imported, bert_dir, tmp_path
):
    """The checkpoint's recorded directory moved away, and --data names the HF directory (its
    vocab.txt copied as dict.txt: one token a line, no counts)."""
    import torch

    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference

    shutil.copytree(imported, tmp_path / "moved")
    (tmp_path / "moved" / "dict.txt").unlink()
    state = torch.load(tmp_path / "moved" / "model.pt", weights_only=False)
    state["cfg"]["task"]["data"] = str(tmp_path / "gone")  # the recorded directory moved away
    torch.save(state, tmp_path / "moved" / "model.pt")
    data = tmp_path / "hfdata"
    data.mkdir()
    (data / "dict.txt").write_text("[PAD]\n[UNK]\nthe the\n")
    with pytest.raises(CheckpointError, match=r"hfdata/dict.txt is not a fairseq dictionary"):
        load_for_inference(tmp_path / "moved" / "model.pt", str(data))


def test_convert_hf_export_of_a_truncated_checkpoint_is_one_line(imported, tmp_path):
    from utils import run_script

    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes((imported / "model.pt").read_bytes()[:5000])
    proc = run_script("convert_hf.py", ["export", str(ckpt), str(tmp_path / "hf")])
    assert proc.returncode == 2
    assert "model.pt is not a readable checkpoint: truncated or corrupt" in proc.stderr
    assert "Traceback" not in proc.stderr


def _old_style(imported, ckpt, recorded):
    """``imported``'s model saved as fairseq saved checkpoints before its configs: an ``args``
    namespace (recording ``recorded`` as its data directory), no ``cfg``."""
    import torch
    from fairseq import options

    import truneg_fairseq  # noqa: F401  (registration)

    sizes = json.loads((imported / "import.json").read_text())["model_args"]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser, [str(recorded), "--cpu", "--task", "masked_lm", "--arch", "bert_hf"]
    )
    for key, value in sizes.items():
        setattr(args, key, value)
    state = torch.load(imported / "model.pt", weights_only=False)
    old = {k: v for k, v in state.items() if k != "cfg"}
    torch.save(dict(old, args=args), ckpt)


def test_an_old_style_checkpoint_honours_data(imported, tmp_path):
    from truneg_fairseq.checkpoints import load_for_inference

    ckpt = tmp_path / "old.pt"
    gone = tmp_path / "moved-away"
    _old_style(imported, ckpt, gone)
    models, cfg, task = load_for_inference(ckpt, str(imported))
    assert cfg.task.data == str(imported)
    symbols = [line.split()[0] for line in (imported / "dict.txt").read_text().splitlines()]
    assert task.source_dictionary.symbols[4 : 4 + len(symbols)] == symbols
    # the recorded directory in place, with another dictionary: --data is honoured, or refused
    gone.mkdir()
    (gone / "dict.txt").write_text("".join(f"w{i} 1\n" for i in range(5)))
    with pytest.raises(Exception, match="not the dictionary"):
        load_for_inference(ckpt, str(imported))


# ---- checkpoints saved on a full disk -----------------------------------------------------


def test_a_full_disk_while_saving_a_checkpoint_is_one_error_and_no_partial_file(tmp_path):
    """The plugin's atomic copy to checkpoint_last.pt and torch's own save, each on a disk that
    fills up part way: one CheckpointError, the old checkpoint_last.pt whole, no .tmp left."""
    import torch

    from truneg_fairseq.checkpoints import CheckpointError, checkpoint_write_errors
    from truneg_fairseq.compat import atomic_copy_file

    new, last = tmp_path / "checkpoint_2_20.pt", tmp_path / "checkpoint_last.pt"
    torch.save({"w": torch.zeros(64 * 1024)}, new)  # 256 KiB
    last.write_bytes(b"the previous checkpoint")
    with file_size_limit(64 * 1024):
        with pytest.raises(
            CheckpointError, match=r"checkpoint_last\.pt: saving the checkpoint failed"
        ):
            atomic_copy_file(str(new), str(last))
        with pytest.raises(CheckpointError, match=r"checkpoint_3_30\.pt: saving .*--save-dir"):
            with checkpoint_write_errors(tmp_path / "checkpoint_3_30.pt"):
                torch.save({"w": torch.zeros(64 * 1024)}, tmp_path / "checkpoint_3_30.pt")
    assert last.read_bytes() == b"the previous checkpoint"
    assert not (tmp_path / "checkpoint_last.pt.tmp").exists()


def test_a_full_disk_while_fairseq_saves_a_checkpoint_is_one_error_and_no_tmp(tmp_path):
    """fairseq-train's own save (``torch_persistent_save``, given a temporary file of its own by
    the plugin) on a disk that fills up part way: one CheckpointError, the previous file whole,
    no temporary file; with room, the save lands."""
    import torch
    from fairseq import checkpoint_utils

    import truneg_fairseq  # noqa: F401  (installs the mend)
    from truneg_fairseq.checkpoints import CheckpointError

    last = tmp_path / "checkpoint_last.pt"
    last.write_bytes(b"the previous checkpoint")
    state = {"w": torch.zeros(64 * 1024)}  # 256 KiB
    with file_size_limit(64 * 1024):
        with pytest.raises(CheckpointError, match=r"checkpoint_last\.pt: saving .*--save-dir"):
            checkpoint_utils.torch_persistent_save(state, str(last))
    assert last.read_bytes() == b"the previous checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == [last.name]
    checkpoint_utils.torch_persistent_save(state, str(last))
    assert torch.equal(torch.load(last, weights_only=True)["w"], state["w"])


def test_a_full_disk_while_fairseq_copies_a_checkpoint_is_one_error_and_no_tmp(tmp_path):
    """fairseq-train's copy of a new checkpoint to checkpoint_best.pt (``PathManager.copy``,
    made atomic by the plugin) on a disk that fills up part way: one CheckpointError naming the
    copy, the previous checkpoint_best.pt whole, no .tmp beside it; with room, the copy lands."""
    import torch
    from fairseq.file_io import PathManager

    import truneg_fairseq  # noqa: F401  (installs the atomic copy)
    from truneg_fairseq.checkpoints import CheckpointError

    assert getattr(PathManager.copy, "truneg_atomic", False)
    new, best = tmp_path / "checkpoint_2_20.pt", tmp_path / "checkpoint_best.pt"
    torch.save({"w": torch.zeros(64 * 1024)}, new)  # 256 KiB
    best.write_bytes(b"the previous best checkpoint")
    with file_size_limit(64 * 1024):
        with pytest.raises(CheckpointError, match=r"checkpoint_best\.pt: saving .*--save-dir"):
            PathManager.copy(str(new), str(best), overwrite=True)
    assert best.read_bytes() == b"the previous best checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([best.name, new.name])
    assert PathManager.copy(str(new), str(best), overwrite=True)
    assert best.read_bytes() == new.read_bytes()


def _full_disk_run(script, argv, out, limit):
    """``script argv`` writing ``out`` on a disk that fills up after ``limit`` bytes: one error
    naming the flag and the file, no file (nor temporary file) left in its directory."""
    from utils import run_script

    with file_size_limit(limit):
        proc = run_script(script, [str(a) for a in argv])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert re.search(re.escape(f"{out}: writing failed (") + r"[^)]+\): free space", proc.stderr)
    assert not [p.name for p in out.parent.iterdir()]
    return proc


def test_a_full_disk_while_writing_word_vectors_is_one_error_and_no_file(
    tmp_path, corpus_dir, data_bin
):
    out = tmp_path / "out" / "vectors.npy"
    out.parent.mkdir()
    argv = ["--dict", data_bin / "dict.txt", "--text", corpus_dir / "tok" / "train.txt"]
    proc = _full_disk_run("word_vectors.py", [*argv, "--dim", "8", "--output", out], out, 1024)
    assert f"error: --output {out}" in proc.stderr


def test_a_full_disk_while_writing_the_evaluation_table_is_one_error_and_no_file(
    imported, tmp_path
):
    text = tmp_path / "text.txt"
    text.write_text("the farmer will stay at home .\nthe big house is large .\n")
    out = tmp_path / "out" / "table.json"
    out.parent.mkdir()
    argv = ["--text", text, "--device", "cpu", imported / "model.pt", "--table-json", out]
    proc = _full_disk_run("evaluate_mlm.py", argv, out, 64)
    assert f"error: --table-json {out}" in proc.stderr


# ---- SQuAD preparation --------------------------------------------------------------------


def test_squad_preparation_of_a_long_input_logs_progress(
    tmp_path, corpus_dir, data_bin, monkeypatch, caplog
):
    from fairseq.data import Dictionary
    from squad_fixtures import squad_json

    import truneg_fairseq.data.squad as squad

    path = tmp_path / "train.json"
    path.write_text(json.dumps(squad_json(n_copies=6)))
    monkeypatch.setattr(squad, "PROGRESS_EVERY", 5)
    monkeypatch.setattr(squad, "PROGRESS_EVERY_ARTICLES", 2)
    wt = squad.WordTokenizer(
        Dictionary.load(str(data_bin / "dict.txt")),
        "sentencepiece",
        spm_model=str(corpus_dir / "spm.model"),
    )
    with caplog.at_level("INFO", logger="truneg_fairseq.data.squad"):
        examples = squad.load_squad_json(path)
        data = squad.build_features(examples, wt, train=True)
    assert "train.json: 2 of 6 articles read" in caplog.text
    assert re.search(rf"SQuAD: 5 of {len(data.examples)} questions tokenized", caplog.text)
