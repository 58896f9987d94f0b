"""GLUE preparation: labels, folders with some tasks, CR-only line endings, outputs under a
comma."""

import pytest


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
    from truneg_fairseq.data.glue_tasks import TASKS, prepare_task
    from truneg_fairseq.errors import CorpusError

    glue = _rte(tmp_path / "glue", ["entailment"] * 12, ["entailment", "not_entailment"] * 4)
    with pytest.raises(CorpusError, match=r"RTE/dev\.tsv: label 'not_entailment' of 4 rows never"):
        prepare_task(TASKS["RTE"], glue, tmp_path / "out", spm_tokenizer, data_bin / "dict.txt")
    assert not (tmp_path / "out" / "RTE").exists()


def test_a_glue_folder_with_some_tasks_prepares_those_and_logs_the_rest(tmp_path, caplog):
    from truneg_fairseq.data.glue_tasks import select_tasks
    from truneg_fairseq.errors import CorpusError

    glue = _rte(tmp_path / "glue", ["entailment", "not_entailment"] * 6, ["entailment"] * 4)
    with caplog.at_level("INFO", logger="truneg_fairseq.data.glue_tasks"):
        assert select_tasks(glue) == ["RTE"]
    assert "preparing RTE; skipped (no folder there): CoLA, SST-2" in caplog.text
    assert select_tasks(glue, ["RTE", "CoLA"]) == ["RTE", "CoLA"]  # asked for: never skipped
    with pytest.raises(CorpusError, match="holds none of the GLUE task folders"):
        select_tasks(tmp_path)


def test_an_explicitly_requested_missing_task_stays_an_error(tmp_path, spm_tokenizer, data_bin):
    from truneg_fairseq.data.glue_tasks import TASKS, prepare_task
    from truneg_fairseq.errors import CorpusError

    glue = _rte(tmp_path / "glue", ["entailment", "not_entailment"] * 6, ["entailment"] * 4)
    with pytest.raises(CorpusError, match=r"CoLA: .*CoLA/train\.tsv not found"):
        prepare_task(TASKS["CoLA"], glue, tmp_path / "out", spm_tokenizer, data_bin / "dict.txt")


def test_glue_files_with_cr_only_line_endings_are_read_as_lines(tmp_path):
    from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted

    glue = _rte(tmp_path, ["entailment", "not_entailment"] * 6, ["entailment"] * 4, newline="\r")
    exs, skipped = read_split_counted(TASKS["RTE"], glue / "RTE" / "train.tsv")
    assert len(exs) == 12 and not skipped
    assert exs[1].label == "not_entailment" and exs[0].text1.startswith("the farmer")


def test_glue_output_under_a_comma_is_binarized_with_every_split(
    tmp_path, spm_tokenizer, data_bin, monkeypatch, caplog
):
    import truneg_fairseq.data.glue_tasks as glue_mod

    glue = _rte(tmp_path / "glue", ["entailment", "not_entailment"] * 6, ["entailment"] * 4)
    out = tmp_path / "runs,v2" / "glue-bin"
    monkeypatch.setattr(glue_mod, "PROGRESS_EVERY", 5)  # long input: progress lines
    with caplog.at_level("INFO", logger="truneg_fairseq.data.glue_tasks"):
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
