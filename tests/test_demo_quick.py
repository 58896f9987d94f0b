"""The demo's first look at a tiny size: the real pipeline (WordNet corpus, prepare_corpus.py,
synonym table, fairseq-train for stage 1 and stage 2, scoring on fixed masks) with
--quick prints the first-look table and stops before the full run."""

import re

import pytest
from command_runs import run_script


@pytest.mark.slow
def test_first_look_prints_its_table_and_quick_stops_there(tmp_path, wn):
    work = tmp_path / "demo"
    proc = run_script(
        "demo.py",
        [
            "--workdir",
            str(work),
            "--quick",
            "--first-look-updates",
            "6",
            "--vocab-size",
            "1500",
            "--max-lines",
            "4000",
            "--batch-size",
            "8",
            "--criteria",
            "mlm_plain",
            "--jobs",
            "1",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    out = proc.stdout
    assert "First look: stage 1 mlm_plain 6 updates, then each criterion 2 updates" in out
    header = next(line for line in out.splitlines() if line.startswith("run "))
    assert "pred-level %" in header and "iter-level %" in header
    assert "\npred-level: % of mispredicted masked words" in out  # what the columns are
    rows = re.findall(r"^roberta_mlm_plain\s+(\d+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert [r[0] for r in rows] == ["0", "2"]  # the shared start and the end of stage 2
    assert all(float(r[1]) > 0 for r in rows)  # a valid loss in bits
    assert re.search(r"\(first look after \d+s\)", out)
    results = work / "first_look" / "results"
    assert (results / "progress.tsv").read_text().startswith("run\tupdate\t")
    assert (results / "commands.sh").is_file()
    # the baseline's training logs hold the ratios, as hard correction's would
    for run in ("train_roberta_stage1", "train_roberta_mlm_plain"):
        log = (work / "first_look" / "logs" / f"{run}.log").read_text()
        assert re.search(r"\| train \| .*pred_corr_ratio [\d.]+ \| iter_corr_ratio", log), run
    # --quick: the full run never started
    assert not (work / "checkpoints").exists() and not (work / "results").exists()
    assert "The full run goes on" not in out


def test_quick_without_a_first_look_is_one_line(tmp_path):
    proc = run_script(
        "demo.py", ["--workdir", str(tmp_path / "d"), "--quick", "--first-look-updates", "0"]
    )
    assert proc.returncode == 2
    # the last line (torch may warn of its own deprecations on the first import of fairseq)
    assert proc.stderr.splitlines()[-1] == (
        "error: --quick runs the first look only: give --first-look-updates N > 0 with it"
    )
    assert "Traceback" not in proc.stderr


def test_a_foreign_corpus_in_the_workdir_is_one_error_and_kept(tmp_path):
    """A corpus.txt the user already had is never taken as the demo's corpus, and --force
    removes nothing of a directory the demo did not write."""
    work = tmp_path / "mine"
    work.mkdir()
    (work / "corpus.txt").write_text("my own corpus\n")
    (work / "notes.txt").write_text("keep me\n")
    for extra in ([], ["--force"]):
        proc = run_script("demo.py", ["--workdir", str(work), "--quick", *extra])
        assert proc.returncode == 2, proc.stderr[-2000:]
        last = proc.stderr.splitlines()[-1]
        assert last.startswith("error: --workdir ") and "Traceback" not in proc.stderr
        assert "corpus.txt already there, not written by truneg-demo" in last
        assert (work / "corpus.txt").read_text() == "my own corpus\n"
        assert (work / "notes.txt").read_text() == "keep me\n"
    assert not (work / ".truneg-work.json").exists()


def test_force_removes_only_what_the_pipeline_wrote(tmp_path):
    import logging

    from truneg_fairseq.pipelines.study.workdir import WORK_MARKER, claim_workdir

    work = tmp_path / "w"
    log = logging.getLogger("test")
    claim_workdir(str(work), "truneg-demo", "--workdir", False, log)
    assert (work / WORK_MARKER).is_file()
    (work / "corpus.txt").write_text("the demo's corpus\n")
    (work / "checkpoints" / "roberta").mkdir(parents=True)
    (work / "checkpoints" / "roberta" / "checkpoint_last.pt").write_bytes(b"x")
    (work / "notes.txt").write_text("keep me\n")
    (work / "my_data").mkdir()
    (work / "my_data" / "a.txt").write_text("mine\n")
    # a second claim without --force keeps everything (steps are reused)
    claim_workdir(str(work), "truneg-demo", "--workdir", False, log)
    assert (work / "corpus.txt").is_file() and (work / "checkpoints").is_dir()
    claim_workdir(str(work), "truneg-demo", "--workdir", True, log)
    assert not (work / "corpus.txt").exists() and not (work / "checkpoints").exists()
    assert (work / "notes.txt").read_text() == "keep me\n"
    assert (work / "my_data" / "a.txt").read_text() == "mine\n"
    assert (work / WORK_MARKER).is_file()


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--stage1-updates", "50", "--stage2-updates", "40", "--warmup", "100"], "--warmup 100"),
        (["--stage1-updates", "100", "--warmup", "100"], "--warmup 100"),
        (["--stage2-updates", "2", "--points", "4"], "--stage2-updates 2, --points 4"),
    ],
)
def test_a_budget_the_schedule_cannot_hold_is_one_error_first(tmp_path, flags, named):
    """A warm-up past stage 1 (stage 2's learning rate would be negative) or fewer stage-2
    updates than scored points: one error naming the flags, before anything is written."""
    work = tmp_path / "d"
    proc = run_script("demo.py", ["--workdir", str(work), *flags])
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith(f"error: {named}")
    assert "Traceback" not in proc.stderr
    assert not work.exists()


def test_a_first_look_without_synonym_predictions_says_what_it_shows():
    from truneg_fairseq.cli.demo import first_look_note
    from truneg_fairseq.evaluation.false_negatives import Report

    def report(pred, content, loss=10.27):
        return Report(loss, 7.4, 7.4, pred, pred, pred, content, 4140, 2756, 2000, 0)

    flat = {"roberta_mlm_plain": {0: report(0.0, 0.0), 33: report(0.0, 0.0, 10.29)}}
    note = first_look_note(flat, 100)
    assert "after 100 updates" in note and "valid loss 10.27 bits" in note
    assert "false-negative columns are 0" in note and "no cases yet" in note
    learnt = {"roberta_mlm_plain": {0: report(0.0, 3.0), 33: report(0.05, 12.0)}}
    assert first_look_note(learnt, 100) == ""
