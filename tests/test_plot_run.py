"""truneg-plot-run: the statistics a real fairseq-train run logged (hard correction on the tiny
corpus) read back from its stdout (simple format), its --log-file (json format) and its
--tensorboard-logdir give the same table, written as Markdown and CSV with the figures; so do a
real truneg-hf-train run's stdout and tensorboard folder, its losses in bits; a GLUE-style
fine-tuning log gives its accuracy. Without matplotlib the table comes with a note; a source
with nothing to read or to plot, or a forged events file, is one error; an output never lands on
an input or on another command line's outputs. The figures name the run and criterion, have a
legend per panel and units on their axes, one colour per criterion (the study's too), and keep
series that lie on one another apart; several runs share one table and figure."""

import csv
import sys
from pathlib import Path

import pytest
from command_runs import run_script
from fairseq_runs import TINY_ROBERTA, fairseq_train
from finetune_flags import sentence_prediction_args

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
    written = sorted(p.name for p in (tmp_path / "o").iterdir() if not p.name.startswith("."))
    assert written == ["ratios.csv", "ratios.md"]


@pytest.mark.parametrize("content", [None, "", "no statistics here\n"])
def test_a_source_with_nothing_to_read_is_one_error(content, tmp_path):
    source = tmp_path / "train.log"
    if content is not None:
        source.write_text(content)
    proc = run_script("plot_run.py", [str(source)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {source}"), proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ([source.name] if content is not None else [])


def test_an_empty_events_folder_is_one_error(tmp_path):
    proc = run_script("plot_run.py", [str(tmp_path)])
    assert proc.returncode == 2 and "holds no tensorboard events" in proc.stderr


# ---- outputs: never an input, never another command line's -------------------------------------
def test_an_output_on_its_own_input_is_refused(runs, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    source = logs / "ratios.md"  # a log saved under the name of an output
    source.write_text((runs / "simple.out").read_text())
    before = source.read_bytes()
    proc = run_script("plot_run.py", [str(source), "--out", str(logs)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--out {source}" in proc.stderr and "input" in proc.stderr
    assert source.read_bytes() == before and [p.name for p in logs.iterdir()] == ["ratios.md"]


def test_two_logs_of_one_folder_keep_their_own_outputs(runs, tmp_path):
    from command_runs import snapshot

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text((runs / "simple.out").read_text())
    lines = (runs / "simple.out").read_text().splitlines(keepends=True)
    (logs / "b.log").write_text("".join(x for x in lines if "valid on" not in x))
    for name in ("a.log", "b.log"):
        proc = run_script("plot_run.py", [str(logs / name)])
        assert proc.returncode == 0, proc.stderr
    assert ("valid", "3") in [tuple(r[:2]) for r in _table(logs / "a.log.plots")]
    assert ("valid", "3") not in [tuple(r[:2]) for r in _table(logs / "b.log.plots")]

    shared = tmp_path / "shared"
    assert run_script("plot_run.py", [str(logs / "a.log"), "--out", str(shared)]).returncode == 0
    kept = snapshot(shared)
    proc = run_script("plot_run.py", [str(logs / "b.log"), "--out", str(shared)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"already holds the output of `truneg-plot-run {logs / 'a.log'}`" in proc.stderr
    assert snapshot(shared) == kept
    # the same command line again refreshes its own outputs
    assert run_script("plot_run.py", [str(logs / "a.log"), "--out", str(shared)]).returncode == 0


# ---- tensorboard files that are not what they say ------------------------------------------------
def _record(data: bytes, length=None, length_crc=None, data_crc=None) -> bytes:
    """One TFRecord: ``length`` and the checksums as given, else right (tensorboardX's
    checksum, as a run's files have it)."""
    import struct

    from tensorboardX.record_writer import masked_crc32c as masked_crc

    head = struct.pack("<Q", len(data) if length is None else length)
    n_crc = masked_crc(head) if length_crc is None else length_crc
    d_crc = masked_crc(data) if data_crc is None else data_crc
    return head + struct.pack("<I", n_crc) + data + struct.pack("<I", d_crc)


def _event(step: int, tag: str, value: float) -> bytes:
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary

    summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
    return Event(step=step, wall_time=1.0, summary=summary).SerializeToString()


def test_the_checksum_is_tensorboards():
    from tensorboardX.record_writer import masked_crc32c

    from truneg_fairseq.data.event_records import crc32c, masked_crc

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    for data in (b"", b"x", bytes(range(256)) * 3):
        assert masked_crc(data) == masked_crc32c(data)


GOOD = _record(_event(1, "loss", 7.0))
FORGED = {
    "a length past 2^64 with no checksum": (GOOD + b"\xff" * 12, "length's checksum"),
    "2^62 bytes in a file of 12": (_record(b"", length=2**62)[:12], "says 4611686018427387904"),
    "a length that is the file's, data no event": (_record(b"\xff" * 40), "is not an event"),
    "data that is not its checksum": (GOOD + _record(b"x" * 9, data_crc=1), "data's checksum"),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_a_forged_events_file_is_one_error_naming_it(case, tmp_path):
    content, why = FORGED[case]
    events = tmp_path / "tb" / "train_inner" / "events.out.tfevents.1.host"
    events.parent.mkdir(parents=True)
    events.write_bytes(content)
    proc = run_script("plot_run.py", [str(tmp_path / "tb")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert str(events) in proc.stderr and why in proc.stderr, proc.stderr
    assert not (tmp_path / "tb.plots").exists()


# ---- truneg-hf-train's runs ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    """A truneg-hf-train run of hard correction (6 updates, evaluations at 3 and 6): its saved
    stdout (``hf.log``) and its output directory (``run``, tensorboard events in ``run/runs``)."""
    from hf_fixtures import tiny_bert_and_texts

    root = tiny_bert_and_texts(tmp_path_factory.mktemp("plot_hf"))
    args = [str(root / "bert"), "--train", str(root / "texts"), "--valid", str(root / "valid.txt")]
    args += ["--output-dir", str(root / "run"), "--cpu", "--batch-size", "4", "--seq-len", "32"]
    args += ["--lr", "1e-3", "--max-steps", "6", "--log-steps", "1", "--eval-steps", "3"]
    args += ["--save-steps", "6", "--report-to", "tensorboard"]
    proc = run_script("hf_train.py", args)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    (root / "hf.log").write_text(proc.stdout)
    return root


def _ppl_bits(log: str) -> dict:
    """{(source, update): log2 of the perplexity a truneg-hf-train line logged}: its MLM loss in
    bits, whatever unit the loss itself is logged in."""
    import math
    import re

    out = {}
    for line in log.splitlines():
        m = re.search(r"\| (eval_)?ppl ([\d.e+]+) \|.*num_updates (\d+)$", line)
        if m:
            out[("valid" if m.group(1) else "train", m.group(3))] = math.log2(float(m.group(2)))
    return out


def test_a_truneg_hf_train_log_and_its_tensorboard_folder(hf_run, tmp_path):
    tables = {}
    for name, source in (
        ("log", hf_run / "hf.log"),
        ("runs", hf_run / "run" / "runs"),
        ("output_dir", hf_run / "run"),
    ):
        out = tmp_path / name
        proc = run_script("plot_run.py", [str(source), "--out", str(out)])
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "criterion hard_correction, truneg-hf-train" in proc.stdout
        for f in ("ratios.md", "ratios.csv", "ratios.png", "losses.png"):
            assert (out / f).is_file() and (out / f).stat().st_size > 0, f
        tables[name] = _table(out)
    rows = tables["log"]
    assert rows[0][:3] == ["source", "update", "loss (bits)"] and RATIO in rows[0]
    assert [(r[0], r[1]) for r in rows[1:]] == [("train", str(u)) for u in range(1, 7)] + [
        ("valid", "3"),
        ("valid", "6"),
    ]
    bits = _ppl_bits((hf_run / "hf.log").read_text())
    for r in rows[1:]:
        assert float(r[2]) == pytest.approx(bits[(r[0], r[1])], abs=0.01), r
    assert tables["runs"] == tables["output_dir"] == rows


def test_a_source_with_nothing_to_plot_is_one_error(tmp_path):
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb" / "train_inner"))
    writer.add_scalar("wps", 310.0, 1)  # a value, but none a figure or the table shows
    writer.close()
    log = tmp_path / "train.log"
    log.write_text("epoch 001 | valid on 'valid' subset | wps 3 | num_updates 3\n")
    for source in (tmp_path / "tb", log):
        proc = run_script("plot_run.py", [str(source)])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"error: {source}: ") and "none of the values" in proc.stderr
        assert not list(tmp_path.glob("*.plots"))


# ---- figures for a slide -----------------------------------------------------------------------
def _figures(sources, out, labels=None):
    """What each figure of ``sources`` shows (read back from it), as truneg-plot-run draws it."""
    from truneg_fairseq.cli.plot_run import run_labels
    from truneg_fairseq.data.train_logs import read_run
    from truneg_fairseq.pipelines.run_plot import results_of, write_run_plot

    labels = labels or run_labels([str(s) for s in sources])
    runs = [results_of(read_run(str(s)), label) for s, label in zip(sources, labels)]
    return write_run_plot(runs, str(out))


def test_each_figure_has_a_title_legends_and_units(runs, tmp_path):
    written = _figures([runs / "simple" / "tb"], tmp_path)
    assert set(written["figures"]) == {"ratios.png", "losses.png", "scores.png"}
    assert written["figures"]["scores.png"] is None  # no task score in a pre-training log
    for name in ("ratios.png", "losses.png"):
        shown = written["figures"][name]
        assert "simple (criterion mlm_hard_correction, fairseq-train)" in shown["title"]
        for panel in shown["panels"]:
            assert panel["legend"] == ["train", "valid"], (name, panel)
            assert panel["xlabel"] == "updates" and panel["ylabel"].endswith(")"), panel
            assert "valid" not in panel["ylabel"]
            (_, c1, m1, s1, w1), (_, c2, m2, s2, w2) = panel["lines"]
            assert c1 == c2 and (s1, w1) != (s2, w2)  # one run, one colour; train and valid apart
    loss = written["figures"]["losses.png"]["panels"][0]
    assert loss["ylabel"] == "loss (bits)"


def test_a_glue_log_plots_its_accuracy(corpus_dir, tmp_path):
    from corpus_fixtures import make_classification_data

    data = make_classification_data(corpus_dir, tmp_path / "cls")
    (tmp_path / "ft").mkdir()  # fine-tuning's SAVE_DIR, train.log in it as the recipe has it
    fairseq_train(
        data,
        tmp_path / "ft",
        sentence_prediction_args(TINY_ROBERTA[:-2], max_update=4)
        + ["--validate-interval-updates", "2", "--log-file", str(tmp_path / "ft" / "train.log")],
    )
    proc = run_script(
        "plot_run.py", [str(tmp_path / "ft" / "train.log"), "--out", str(tmp_path / "o")]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no ratios.png" in proc.stdout and not (tmp_path / "o" / "ratios.png").exists()
    rows = _table(tmp_path / "o")
    assert "accuracy %" in rows[0] and RATIO not in rows[0]
    assert any(r[0] == "valid" and r[rows[0].index("accuracy %")] != "-" for r in rows[1:])
    shown = _figures([tmp_path / "ft" / "train.log"], tmp_path / "f")["figures"]["scores.png"]
    assert "ft (criterion sentence_prediction, fairseq-train)" in shown["title"]
    assert [p["ylabel"] for p in shown["panels"]] == ["accuracy (%)"]
    assert shown["panels"][0]["legend"] == ["train", "valid"]


def test_several_runs_in_one_table_and_figure_one_colour_per_criterion(runs, hf_run, tmp_path):
    sources = [runs / "simple.out", runs / "json.log", hf_run / "hf.log"]
    out = tmp_path / "cmp"
    proc = run_script("plot_run.py", [*map(str, sources), "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _table(out)
    assert rows[0][:3] == ["run", "source", "update"]
    assert {r[0] for r in rows[1:]} == {"simple", "json", "hf"}
    shown = _figures(sources, tmp_path / "f")["figures"]["ratios.png"]
    assert shown["title"].endswith("simple vs json vs hf")
    for panel in shown["panels"]:
        lines = {label: rest for label, *rest in panel["lines"]}
        assert panel["legend"] == list(lines) and len(lines) == 6
        fairseq = lines["simple (mlm_hard_correction) valid"]
        hf = lines["hf (hard_correction) valid"]
        assert fairseq[0] == hf[0]  # one criterion, one colour, whichever front end
        # runs that lie on one another (the same run logged twice) stay apart
        twin = lines["json (mlm_hard_correction) valid"]
        assert twin[1] != fairseq[1] and twin[3] != fairseq[3]
    assert run_script("plot_run.py", [*map(str, sources)]).returncode == 2  # where to: --out


def test_the_study_draws_a_criterion_in_one_colour_for_every_family(tmp_path):
    from truneg_fairseq.core.statistics import Report
    from truneg_fairseq.pipelines.figures import draw
    from truneg_fairseq.pipelines.study.report import plot, study_figures

    def report(ratio, loss=9.0):
        return Report(loss, 7.4, 7.4, ratio, ratio, ratio, 60.0, 4140, 2756, 2000, 0)

    results = {}
    for family, baseline in (("roberta", "masked_lm"), ("electra", "electra")):
        for criterion, scale in (
            (baseline, 1.0),
            ("mlm_hard_correction", 1.0),
            ("mlm_soft_reg", 2),
        ):
            # hard correction lies on the baseline, as it does before the ratios move
            results[f"{family}_{criterion}"] = {u: report(scale * u / 100) for u in (0, 5, 10)}
    assert sorted(p.name for p in map(Path, plot(str(tmp_path), results))) == [
        "losses.png",
        "ratios.png",
    ]
    for name, title, panels in study_figures(results):
        shown = draw(str(tmp_path / name), title, panels)
        assert "(6 runs)" in shown["title"]
        for panel in shown["panels"]:
            assert panel["legend"] == list(results)
            lines = {label: rest for label, *rest in panel["lines"]}
            for criterion in ("mlm_hard_correction", "mlm_soft_reg"):
                assert lines[f"roberta_{criterion}"][0] == lines[f"electra_{criterion}"][0]
                assert lines[f"roberta_{criterion}"][2] != lines[f"electra_{criterion}"][2]
            base, hc = lines["roberta_masked_lm"], lines["roberta_mlm_hard_correction"]
            assert base[0] != hc[0] and base[1] != hc[1] and base[3] > hc[3]
