"""A byte-order mark before a needed column of a GLUE, perturbed or contrast file is said in
words."""

import pytest

# ---- GLUE headers -------------------------------------------------------------------------


def test_a_bom_before_a_needed_glue_column_is_said_in_words(tmp_path):
    from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted
    from truneg_fairseq.errors import CorpusError

    path = tmp_path / "train.tsv"
    path.write_text("\ufeffsentence\tlabel\nthe farmer will stay .\t1\n", encoding="utf-8")
    with pytest.raises(CorpusError) as e:
        read_split_counted(TASKS["SST-2"], path)
    msg = str(e.value)
    assert f"{path}: the file starts with a byte-order mark (BOM)" in msg
    assert "\ufeff" not in msg and "header: sentence, label" in msg
    # a BOM before a column the task does not read is no error
    rte = tmp_path / "rte.tsv"
    rte.write_text(
        "\ufeffindex\tsentence1\tsentence2\tlabel\n0\ta b .\tc d .\tentailment\n", encoding="utf-8"
    )
    exs, _ = read_split_counted(TASKS["RTE"], rte)
    assert len(exs) == 1 and exs[0].label == "entailment"


def test_a_bom_before_a_needed_column_of_a_perturbed_or_contrast_file_is_said_in_words(tmp_path):
    from truneg_fairseq.data.glue_tasks import TASKS
    from truneg_fairseq.data.perturbations import column_index
    from truneg_fairseq.errors import CorpusError
    from truneg_fairseq.evaluation.contrast import read_contrast_tsv

    with pytest.raises(CorpusError) as e:
        column_index("\ufeffsentence\tlabel", "sentence", "dev.tsv", TASKS["SST-2"])
    assert "dev.tsv: the file starts with a byte-order mark (BOM)" in str(e.value)
    assert "\ufeff" not in str(e.value)
    tsv = tmp_path / "contrast.tsv"
    tsv.write_text("\ufeffpair_id\tsentence\tlabel\np1\ta b .\t1\n", encoding="utf-8")
    with pytest.raises(ValueError) as e:
        read_contrast_tsv(str(tsv), "pair_id", "label")
    assert "no column 'pair_id' (--pair-column) (the file starts with a byte-order mark, BOM" in (
        str(e.value)
    )
    assert "\ufeff" not in str(e.value) and "header is: pair_id, sentence, label" in str(e.value)
