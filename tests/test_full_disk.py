"""A full disk while a command writes a checkpoint, word vectors, an evaluation table or a
converted model (convert_hf.py import and export): one error and no partial file."""

import pytest
from command_runs import run_script
from failures import file_size_limit, file_size_limit_of_child, full_disk_run


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


def test_a_full_disk_while_writing_word_vectors_is_one_error_and_no_file(
    tmp_path, corpus_dir, data_bin
):
    out = tmp_path / "out" / "vectors.npy"
    out.parent.mkdir()
    argv = ["--dict", data_bin / "dict.txt", "--text", corpus_dir / "tok" / "train.txt"]
    proc = full_disk_run("word_vectors.py", [*argv, "--dim", "8", "--output", out], out, 1024)
    assert f"error: --output {out}" in proc.stderr


def test_a_full_disk_while_writing_the_evaluation_table_is_one_error_and_no_file(
    imported_bert, tmp_path
):
    text = tmp_path / "text.txt"
    text.write_text("the farmer will stay at home .\nthe big house is large .\n")
    out = tmp_path / "out" / "table.json"
    out.parent.mkdir()
    argv = ["--text", text, "--device", "cpu", imported_bert / "model.pt", "--table-json", out]
    proc = full_disk_run("evaluate_mlm.py", argv, out, 64)
    assert f"error: --table-json {out}" in proc.stderr


@pytest.mark.parametrize("command", ["import", "export"])
def test_a_full_disk_during_conversion_is_one_error_and_replaces_nothing(
    imported_wordpiece, plain_checkpoint, corpus_dir, tmp_path, command
):
    """Weight files that cannot be written (a file-size limit: EFBIG, as ENOSPC on a full disk)."""
    spm_model = corpus_dir / "spm.model"
    out = tmp_path / "out"
    args = (
        ["import", str(imported_wordpiece / "hf"), str(out)]
        if command == "import"
        else ["export", str(plain_checkpoint), str(out), "--spm-model", str(spm_model)]
    )
    proc = run_script("convert_hf.py", args, preexec_fn=file_size_limit_of_child(20_000))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{out}: writing failed" in proc.stderr and "nothing was replaced" in proc.stderr
    assert "Traceback" not in proc.stderr and "inline_container" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no leftovers
