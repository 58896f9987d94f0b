"""``make gpu-check`` on the CPU: the real command (benchmarks/gpu_check.py --quick, its child
processes, real fairseq-train, fairseq's Trainer and task iterators) in a fresh working
directory, a few rows at a time; the time budget (rows beyond it reported as not run); the
per-precision verdicts of the correctness rows."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_benchmark(name: str, monkeypatch):
    """``benchmarks/NAME.py`` as a module (the benchmarks are scripts that import their
    neighbours by name)."""
    for dep in ("gpu_sizes", "gpu_corpus", name):
        spec = importlib.util.spec_from_file_location(dep, REPO / "benchmarks" / f"{dep}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        monkeypatch.setitem(sys.modules, dep, module)
    return module


def run_check(tmp_path, *flags, timeout=240):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--quick", *flags],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = tmp_path / "gpu-check"
    report = json.loads((out / "report.json").read_text())
    return report, (out / "report.md").read_text(), {r["id"]: r for r in report["rows"]}


def test_schedule_shares_the_budget_and_lists_rows_beyond_it(monkeypatch):
    gpu_check = load_benchmark("gpu_check", monkeypatch)
    now = [0.0]
    rows = [
        ("a", "s", "A", 1, "k", {"cost": 30.0}),
        ("b", "s", "B", 3, "k", {"cost": 67.0}),
        ("c", "s", "C", 1, "k", {"cost": 1.0}),
        ("d", "s", "D", 1, "k", {"cost": 1.0}),
    ]
    shares = {}

    def run_row(row_id, section, title, kind, params, share):
        shares[row_id] = share
        now[0] += params["cost"]
        return [{"id": row_id, "section": section, "title": title, "status": "PASS"}]

    out = gpu_check.schedule(rows, 100.0, run_row, clock=lambda: now[0])
    assert shares == {"a": pytest.approx(100 / 6), "b": pytest.approx(70 * 3 / 5)}
    assert [r["status"] for r in out] == ["PASS", "PASS"] + [gpu_check.BUDGET_STATUS] * 2
    assert out[2]["reason"].startswith("3 s of the 100 s budget left")

    # a row with a least time (a compile) gets it while that much is left, else what is left
    now[0], shares = 0.0, {}
    rows = [
        ("a", "s", "A", 10, "k", {"cost": 10.0}),
        ("b", "s", "B", 1, "k", {"cost": 50.0, "min_s": 50.0}),
        ("c", "s", "C", 1, "k", {"cost": 1.0, "min_s": 80.0}),
    ]
    gpu_check.schedule(rows, 100.0, run_row, clock=lambda: now[0])
    assert shares == {"a": pytest.approx(100 * 10 / 12), "b": 50.0, "c": 40.0}
    # the planned compiled rows ask for theirs
    planned = {r[0]: r[5] for r in gpu_check.plan(quick=False, full=False, cuda=True)}
    assert planned["train:small:compiled"]["min_s"] == gpu_check.COMPILE_MIN_S


def test_correctness_verdicts_name_the_updates(monkeypatch):
    gpu_correct = load_benchmark("gpu_correct", monkeypatch)
    ref = [5.0, 4.0, 3.5, 3.2, 3.0, 3.0, 2.9, 2.9, 2.8, 2.8]
    nan = float("nan")
    runs = {
        "fp32": {"losses": ref},
        "bf16": {"losses": [x * 1.001 for x in ref]},
        "amp": {"losses": [nan, nan] + ref[2:], "forward_nonfinite_updates": [1, 2]},
        "fp16": {"losses": [nan] + ref[1:], "forward_nonfinite_updates": []},
        "far": {"losses": [x * 1.5 for x in ref]},
    }
    got = gpu_correct.judge(runs, 0.02)
    assert got["bf16"]["status"] == "PASS" and got["fp32"]["status"] == "PASS"
    assert got["amp"]["status"] == "FAIL"
    assert "not finite in the forward at update(s) 1, 2 (2 of 10)" in got["amp"]["reason"]
    assert got["fp16"]["status"] == "PASS"  # one update skipped by the loss scaler is normal
    assert "update(s) 1 skipped by the loss scaler" in got["fp16"]["reason"]
    assert got["far"]["status"] == "FAIL" and "50.00% from fp32's" in got["far"]["reason"]


def test_spent_budget_writes_both_reports_with_every_row_not_run(tmp_path):
    (tmp_path / "gpu-check").mkdir()
    (tmp_path / "gpu-check" / "older.txt").write_text("kept\n")
    report, md, rows = run_check(tmp_path, "--budget-s", "0", timeout=120)
    assert sorted(p.name for p in (tmp_path / "gpu-check").iterdir()) == [
        "older.txt",
        "report.json",
        "report.md",
    ]  # nothing else, nothing removed
    assert rows and all(r["status"] == "not run (budget)" for r in rows.values())
    assert report["counts"]["budget"] == len(rows) and report["counts"]["PASS"] == 0
    assert f"{len(rows)} not run ({len(rows)} of them for the time budget)" in md
    assert "CPU" in report["device"]["device"] and report["device"]["device"] in md
    assert list(rows)[:2] == ["train:tiny", "train:roberta-tiny"]  # fairseq-train first


@pytest.mark.slow
def test_quick_fairseq_train_and_loader_rows(tmp_path):
    report, md, rows = run_check(tmp_path, "--rows", "train:roberta-tiny,loader:roberta-tiny")
    # (the prefix also selects the compiled row, which needs CUDA)
    assert set(rows) == {"train:roberta-tiny", "loader:roberta-tiny", "train:roberta-tiny:compiled"}
    assert rows.pop("train:roberta-tiny:compiled")["status"] == "not run: needs CUDA"
    assert all(r["status"] == "PASS" for r in rows.values()), md
    train = rows["train:roberta-tiny"]
    assert train["ms_per_update"] > 0 and train["words_per_s"] > 0
    assert train["updates_timed"] >= 10 and "--task batch_masked_lm" in train["command"]
    loader = rows["loader:roberta-tiny"]
    assert math.isclose(loader["updates_per_s"], 1000 / train["ms_per_update"])
    assert loader["batches_per_s"] >= loader["updates_per_s"]
    assert "| fairseq-train | roberta-tiny 4 x 64 | PASS |" in md


@pytest.mark.slow
def test_quick_busy_row(tmp_path):
    report, md, rows = run_check(tmp_path, "--rows", "busy:roberta-tiny")
    busy = rows["busy:roberta-tiny"]
    assert busy["status"] == "PASS" and busy["ms_per_update_profiled"] > 0
    assert busy["updates_profiled"] == 3 and busy["busy_share"] is None  # no CUDA kernels here


@pytest.mark.slow
def test_quick_hf_step_row(tmp_path):
    report, md, rows = run_check(tmp_path, "--rows", "step:tiny:hf")
    hf = rows["step:tiny:hf:eager"]
    assert hf["status"] == "PASS" and hf["ms_per_step"] > 0 and hf["tokens_per_s"] > 0
    assert hf["batch"] == 8 and hf["seq"] == 64


@pytest.mark.slow
def test_quick_correctness_per_precision(tmp_path):
    report, md, rows = run_check(tmp_path, "--rows", "correct:roberta")
    for precision in ("fp32", "bf16"):
        row = rows[f"correct:roberta:{precision}"]
        assert row["status"] == "PASS", row
        assert len(row["losses"]) == report["correctness_updates"] == 10
        assert all(0 < x < 20 for x in row["losses"])
    for precision in ("amp", "fp16"):
        assert rows[f"correct:roberta:{precision}"]["status"] == "not run: needs CUDA"
    assert "## Loss per update: roberta" in md and "| 10 |" in md


@pytest.mark.slow
def test_the_sync_row_and_the_compiled_row_say_they_need_cuda(tmp_path):
    """Without a GPU the rows of torch's sync debug mode and of the compiled update (inductor's
    CPU build takes minutes) say so instead of running."""
    report, md, rows = run_check(
        tmp_path, "--rows", "syncs:tiny,train:tiny:compiled,train:roberta-tiny:compiled"
    )
    assert rows["syncs:tiny"]["status"] == "not run: needs CUDA"
    assert "sync debug mode" in rows["syncs:tiny"]["reason"]
    assert rows["train:tiny:compiled"]["status"] == "not run: needs CUDA"
    assert rows["train:roberta-tiny:compiled"]["status"] == "not run: needs CUDA"
    assert "COMPILE=update" in md


def test_a_compiled_row_stopped_while_compiling_says_so(tmp_path, monkeypatch):
    """A COMPILE=update row whose share ran out before the update was compiled names the way
    to give it the time (on the CPU inductor compiles the tiny update for longer than 3 s)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    gpu_train = load_benchmark("gpu_train", monkeypatch)
    row = gpu_train.run_train("tiny", str(tmp_path), False, 40, 3.0, compile_="update")
    assert row["error"].startswith("FAIL: stopped at its share of the budget (3 s)")
    assert "not compiled yet: run the row alone, --rows train:tiny:compiled" in row["error"]
