"""GLUE preparation: labels, folders with some tasks, CR-only line endings, outputs under a
comma; malformed rows counted per reason, and too many of them one error unless the skip
threshold allows them (also through prepare_glue.py)."""

import json

import pytest
from command_runs import run_script
from glue_fixtures import write_glue

from truneg_fairseq.data.corpus_steps import CorpusError
from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted


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


def _append(path, rows):
    with open(path, "a") as f:
        f.write("".join(r + "\n" for r in rows))


def test_glue_malformed_rows_counted_per_reason(tmp_path):
    glue = write_glue(tmp_path, n_train=40)
    _append(
        glue / "SST-2" / "train.tsv",
        ["the farmer will stay\tat home .\t1", "a good film\t2", "\t1"],
    )
    _append(
        glue / "RTE" / "train.tsv",
        ["9\tthe pilot is here .\tthe pilot is here .\tnot_entailment\textra"],
    )
    _append(glue / "CoLA" / "train.tsv", ["gj04\t1\t\tthe farmer will\tstay ."])
    _append(glue / "STS-B" / "train.tsv", ["1\tg\tf\t2012\t1\tn\tn\ta b\tc d\t7.5"])
    exs, why = read_split_counted(TASKS["SST-2"], glue / "SST-2" / "train.tsv")
    assert len(exs) == 40 and why == {"too_many_columns": 1, "unknown_label": 1, "empty_field": 1}
    assert {e.label for e in exs} == {"0", "1"}
    exs, why = read_split_counted(TASKS["RTE"], glue / "RTE" / "train.tsv")
    assert why == {"too_many_columns": 1} and {e.label for e in exs} == {
        "entailment",
        "not_entailment",
    }
    exs, why = read_split_counted(TASKS["CoLA"], glue / "CoLA" / "train.tsv")
    assert why == {"too_many_columns": 1} and all(e.text1.endswith(".") for e in exs)
    assert (
        sum(read_split_counted(TASKS["STS-B"], glue / "STS-B" / "train.tsv")[1].values()) == 1
    )  # score outside [0, 5]


def test_glue_too_many_malformed_rows_is_an_error(tmp_path):
    glue = write_glue(tmp_path, n_train=40)
    _append(
        glue / "MNLI" / "train.tsv",
        [f"{i}\t1\t1e\tfiction\tx\ty\tx\ty\ta\tb\tmaybe\tmaybe" for i in range(12)],
    )
    with pytest.raises(
        CorpusError, match=r"train.tsv: 12 of 52 rows are malformed \(unknown label: 12\)"
    ):
        read_split_counted(TASKS["MNLI"], glue / "MNLI" / "train.tsv")
    exs, n = read_split_counted(TASKS["MNLI"], glue / "MNLI" / "train.tsv", max_skip_fraction=0.5)
    assert (len(exs), sum(n.values())) == (40, 12)


def test_prepare_glue_logs_reasons_and_honours_threshold(tmp_path, corpus_dir, data_bin):
    glue = write_glue(tmp_path / "glue", n_train=40)
    _append(
        glue / "SST-2" / "train.tsv", [f"a film\tnot_a_label_{i}" for i in range(11)] + ["x\ty\t1"]
    )
    common = [
        "--glue-dir",
        str(glue),
        "--tasks",
        "SST-2",
        "--dict",
        str(data_bin / "dict.txt"),
        "--tokenizer",
        "sentencepiece",
        "--spm-model",
        str(corpus_dir / "spm.model"),
    ]
    proc = run_script("prepare_glue.py", common + ["--output-dir", str(tmp_path / "a")])
    assert (
        proc.returncode != 0
        and "12 of 52 rows are malformed" in proc.stderr
        and "--max-skip-fraction" in proc.stderr
    )
    assert not (tmp_path / "a" / "SST-2").exists()
    proc = run_script(
        "prepare_glue.py",
        common + ["--output-dir", str(tmp_path / "b"), "--max-skip-fraction", "0.3"],
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "SST-2 train.tsv: skipped 12 malformed rows (too many columns: 1, unknown label: 11)"
        in proc.stdout
    )
    meta = json.loads((tmp_path / "b" / "SST-2" / "meta.json").read_text())
    assert meta["skipped_reasons"]["train"] == {"too_many_columns": 1, "unknown_label": 11}
    label_dict = (tmp_path / "b" / "SST-2" / "label" / "dict.txt").read_text().split()[::2]
    assert sorted(w for w in label_dict if not w.startswith("madeupword")) == ["0", "1"]
