"""``make gpu-check QUICK=1`` on the CPU: the real command (benchmarks/gpu_check.py --quick, its
child processes, fairseq's Trainer and task iterators) in a fresh working directory; the
reports it writes hold every section with numbers and name the device."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_gpu_check_writes_both_reports(tmp_path):
    keep = tmp_path / "notes.txt"
    keep.write_text("not the check's\n")
    (tmp_path / "gpu-check").mkdir()
    (tmp_path / "gpu-check" / "older.txt").write_text("kept\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = tmp_path / "gpu-check"
    assert sorted(p.name for p in out.iterdir()) == [
        "older.txt",
        "report.json",
        "report.md",
    ]  # nothing else, nothing removed
    assert keep.read_text() == "not the check's\n"
    report = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()

    device = report["device"]
    assert device["torch"] and device["fairseq"] and device["cpu_cores"] >= 1
    assert "CPU" in device["device"] and device["device"] in md

    runs = report["correctness"]["models"]
    assert set(runs) == {"electra", "roberta"}
    for model in runs.values():
        for precision in ("fp32", "bf16"):
            losses = model[precision]["losses"]
            assert len(losses) == report["correctness"]["updates"] and all(
                x == x and x > 0 for x in losses
            )
            assert model[precision]["status"] == "pass"
        for precision in ("amp", "fp16"):
            assert model[precision]["status"] == "not run: needs CUDA"
    assert report["correctness"]["overall"] == "pass"

    rows = {r["config"]: r for r in report["speed"]["rows"]}
    measured = [r for r in rows.values() if r.get("ms_per_step")]
    assert {r["size"] for r in measured} == {"tiny", "roberta-tiny"}
    assert all(r["tokens_per_s"] > 0 and not r.get("error") for r in measured)
    assert any(r["criterion"] == "hf" for r in measured)
    compiled = [r for r in measured if r["mode"] == "compiled"]
    assert compiled and all(
        r["dynamo"]["graphs"] >= 1 and not r["dynamo"]["fell_back_to_eager"] for r in compiled
    )
    assert all(
        r["error"] == "not run: needs CUDA"
        for r in rows.values()
        if r["config"].endswith(":graphs")
    )

    pipeline = report["data_pipeline"]["rows"]
    assert {r["family"] for r in pipeline} == {"electra", "roberta"}
    assert all(
        r["batches_per_s"] > 0 and r["workers"] >= 1 and r["steps_per_s"] > 0 for r in pipeline
    )
    for heading in ("Correctness", "Speed", "Data pipeline", "Device"):
        assert heading in md
