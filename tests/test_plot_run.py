"""truneg-plot-run: the statistics a real fairseq-train run logged (hard correction on the tiny
corpus) read back from its stdout (simple format), its --log-file (json format) and its
--tensorboard-logdir give the same table, written as Markdown and CSV with the study's plots;
without matplotlib the table comes with a note; a source with nothing to read is one error."""

import csv
import sys

import pytest
from command_runs import run_script
from fairseq_runs import TINY_ROBERTA, fairseq_train

RATIO = "pred-level %"


@pytest.fixture(scope="module")
def runs(data_bin, synonym_table, tmp_path_factory):
    work = tmp_path_factory.mktemp("plot_run")
    common = [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--synonym-table"]
    common += [str(synonym_table), "--max-update", "6", "--validate-interval-updates", "3"]
    simple = fairseq_train(
        data_bin, work / "simple", [*common, "--tensorboard-logdir", str(work / "simple" / "tb")]
    )
    (work / "simple.out").write_text(simple.stdout)
    fairseq_train(
        data_bin,
        work / "json",
        [*common, "--log-format", "json", "--log-file", str(work / "json.log")],
    )
    return work


def _table(out_dir):
    with open(out_dir / "ratios.csv", newline="") as f:
        return list(csv.reader(f))


def test_log_formats_and_events_give_one_table(runs):
    tables = {}
    for name, source in (
        ("stdout", runs / "simple.out"),
        ("log_file", runs / "json.log"),
        ("events", runs / "simple" / "tb"),
    ):
        out = runs / f"out_{name}"
        proc = run_script("plot_run.py", [str(source), "--out", str(out)])
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert RATIO in proc.stdout and "valid" in proc.stdout
        for f in ("ratios.md", "ratios.csv", "ratios.png", "losses.png"):
            assert (out / f).is_file() and (out / f).stat().st_size > 0, f
        tables[name] = _table(out)
    rows = tables["stdout"]
    assert rows[0][:3] == ["source", "update", "loss (bits)"] and RATIO in rows[0]
    # every logged update: 6 training lines (--log-interval 1), validations at 3 and 6
    assert [(r[0], r[1]) for r in rows[1:]] == [("train", str(u)) for u in range(1, 7)] + [
        ("valid", "3"),
        ("valid", "6"),
    ]
    assert tables["log_file"] == rows  # the same run's seed and data: the same numbers
    assert tables["events"] == rows


def test_without_matplotlib_the_table_and_a_note(runs, tmp_path, monkeypatch, capsys):
    from truneg_fairseq.cli.plot_run import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without it has
    assert main([str(runs / "simple.out"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "no plot: matplotlib is not installed" in out and RATIO in out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["ratios.csv", "ratios.md"]


@pytest.mark.parametrize("content", [None, "", "no statistics here\n"])
def test_a_source_with_nothing_to_read_is_one_error(content, tmp_path):
    source = tmp_path / "train.log"
    if content is not None:
        source.write_text(content)
    proc = run_script("plot_run.py", [str(source)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {source}"), proc.stderr
    assert not (tmp_path / "ratios").exists()


def test_an_empty_events_folder_is_one_error(tmp_path):
    proc = run_script("plot_run.py", [str(tmp_path)])
    assert proc.returncode == 2 and "holds no tensorboard events" in proc.stderr
