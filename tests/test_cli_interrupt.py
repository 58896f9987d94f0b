"""Ctrl-C on a command: one line on stderr and exit status 130, no KeyboardInterrupt traceback,
for every command (each ``main`` goes through :func:`truneg_fairseq.cli.common.interruptible`)."""

import os
import signal
import subprocess
import sys

from utils import REPO


def test_every_command_main_says_an_interrupt_in_one_line():
    text = (REPO / "pyproject.toml").read_text()
    entries = [
        line.split("=", 1)[1].strip().strip('"')
        for line in text.split("[project.scripts]", 1)[1].split("\n[", 1)[0].splitlines()
        if line.startswith("truneg-")
    ]
    assert len(entries) >= 18
    for entry in entries:
        module, name = entry.split(":")
        source = (REPO / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        assert f"\n@interruptible\ndef {name}(" in source, f"{entry}: not interruptible"


def test_ctrl_c_during_a_run_exits_130_with_one_line(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "demo.py"), "--workdir", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        for line in proc.stdout:  # the demo is building its corpus from WordNet
            if "[1/5] corpus" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted (Ctrl-C): nothing partial was written"
