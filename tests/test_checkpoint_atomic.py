"""A preempted job always resumes: SIGTERM a real fairseq-train while it saves checkpoints (at
several moments of the save), then resume from checkpoint_last.pt."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fairseq_runs import fairseq_train
from repo_paths import USER_DIR

# wide FFNs: a ~40 MB checkpoint, so a save (write, then copies) lasts long enough to be hit
MODEL = [
    "--arch",
    "roberta_base",
    "--encoder-layers",
    "2",
    "--encoder-embed-dim",
    "256",
    "--encoder-ffn-embed-dim",
    "3072",
    "--encoder-attention-heads",
    "2",
    "--max-positions",
    "64",
    "--tokens-per-sample",
    "64",
    "--criterion",
    "masked_lm",
    "--save-interval-updates",
    "1",
    "--keep-interval-updates",
    "1",
    "--no-epoch-checkpoints",
    "--disable-validation",
]
# while torch.save writes; then 5-30 ms into the copy to checkpoint_last.pt (~40 MB: tens of ms)
TIMINGS = [("write", 0.01), ("copy", 0.005), ("copy", 0.01), ("copy", 0.03)]


def _train_cmd(data_bin, save_dir, max_update, user_dir=True):
    cmd = [
        sys.executable,
        "-m",
        "fairseq_cli.train",
        str(data_bin),
        "--task",
        "masked_lm",
        "--cpu",
        "--num-workers",
        "0",
        "--save-dir",
        str(save_dir),
        "--optimizer",
        "adam",
        "--lr",
        "1e-4",
        "--batch-size",
        "4",
        "--log-format",
        "simple",
        "--log-interval",
        "1",
        "--seed",
        "1",
        "--max-update",
        str(max_update),
        *MODEL,
    ]
    return cmd + (["--user-dir", USER_DIR] if user_dir else [])


def kill_during_save(
    data_bin, save_dir: Path, phase: str, delay: float, user_dir=True, timeout=120
):
    """Start training and SIGTERM it ``delay`` s after the second save reaches ``phase``:
    "write" (the update checkpoint's temporary file appears: torch.save is writing) or "copy" (the
    update checkpoint is complete: fairseq now copies it to checkpoint_last.pt). The first save
    completes untouched. Returns the trainer's return code."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        _train_cmd(data_bin, save_dir, 50, user_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    # "write": the save's temporary file (fairseq's name, or the plugin's own beside it)
    pattern = "*checkpoint_1_2.pt*.tmp" if phase == "write" else "checkpoint_1_2.pt"
    t0 = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - t0 < timeout:
            if any(save_dir.glob(pattern)):
                time.sleep(delay)
                proc.send_signal(signal.SIGTERM)
                break
            time.sleep(0.0005)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_sigterm_during_save_then_resume(data_bin, tmp_path):
    for i, (phase, delay) in enumerate(TIMINGS):
        save_dir = tmp_path / f"run{i}"
        rc = kill_during_save(data_bin, save_dir, phase, delay)
        assert (
            rc == -signal.SIGTERM
        ), f"fairseq-train ended (rc {rc}) before the signal ({phase} + {delay} s)"
        last = save_dir / "checkpoint_last.pt"
        assert last.is_file()  # the first save finished before the signal
        state = torch.load(last, map_location="cpu", weights_only=False)  # whole, never truncated
        done = state["optimizer_history"][-1]["num_updates"]
        proc = fairseq_train(
            data_bin, save_dir, [*MODEL, "--max-update", str(done + 1)], check=False
        )
        log = proc.stdout + proc.stderr
        assert (
            proc.returncode == 0
        ), f"resume after SIGTERM ({phase} + {delay} s) failed:\n{log[-3000:]}"
        assert f"Loaded checkpoint {last} (epoch" in log and f"num_updates {done + 1}" in log
