"""Synonym tables of 0 pairs: refused where pairs are needed, warned about where they only count."""

import pytest
from fairseq_runs import TINY_ROBERTA
from objective_cases import roberta_criteria

from truneg_fairseq.core import objectives

HC = [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--synonym-table", "synonyms.npz"]


# ---- synonym tables of 0 pairs -------------------------------------------------------------


def _empty_table(data_bin, path):
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable

    d = Dictionary.load(str(data_bin / "dict.txt"))
    SynonymTable.empty(d.symbols).save(path)
    return path


@pytest.mark.parametrize(
    "criterion, extra, needs",
    [
        ("mlm_hard_correction", [], "--criterion mlm_hard_correction"),
        (
            "electra",
            ["--electra-rtd-synonym-policy", "original"],
            "--electra-rtd-synonym-policy original",
        ),
    ],
)
def test_a_table_of_no_pairs_is_refused_where_pairs_are_needed(
    data_bin, tmp_path, criterion, extra, needs
):
    from fairseq_runs import TINY_ELECTRA, build_components

    from truneg_fairseq.lexicon import SynonymTableError

    table = _empty_table(data_bin, tmp_path / "empty.npz")
    arch, task = (
        (TINY_ROBERTA, "masked_lm") if criterion != "electra" else (TINY_ELECTRA, "electra")
    )
    with pytest.raises(SynonymTableError) as e:
        build_components(
            data_bin,
            ["--criterion", criterion, "--synonym-table", str(table), *extra],
            arch_args=arch,
            task=task,
        )
    assert f"synonym table {table} holds 0 pairs" in str(e.value)
    assert f"{needs} would train as plain masked LM" in str(e.value)


@pytest.mark.parametrize(
    "criterion", [c for c in roberta_criteria() if not objectives.by_criterion(c).needs_table]
)
def test_a_table_of_no_pairs_is_warned_about_where_it_only_counts(
    data_bin, tmp_path, caplog, criterion
):
    from fairseq_runs import TINY_TN_ROBERTA, build_components

    table = _empty_table(data_bin, tmp_path / "empty.npz")
    with caplog.at_level("WARNING"):
        build_components(
            data_bin,
            ["--criterion", criterion, "--synonym-table", str(table)],
            arch_args=TINY_TN_ROBERTA,
        )
    assert f"synonym table {table} holds 0 pairs" in caplog.text
    assert "every synonym statistic is 0" in caplog.text


def test_building_a_table_of_no_pairs_warns(tmp_path, wn, caplog):
    from truneg_fairseq.lexicon import build_table, vocab_view

    d = tmp_path / "dict.txt"  # words none of which is a synonym of another
    d.write_text("".join(f"{w} 1\n" for w in ("farmer", "lake", "blue", "quickly", "xqzv")))
    view = vocab_view(d, "whitespace")
    with caplog.at_level("WARNING"):
        table, _ = build_table(view, source="wordnet", wn=wn)
    assert len(table) == 0
    assert "the synonym table holds 0 pairs: none of the 5 candidate entries" in caplog.text
