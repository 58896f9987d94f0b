"""Ctrl-C on a command: one line on stderr and exit status 130, no KeyboardInterrupt traceback,
for every command (each ``main`` goes through :func:`truneg_fairseq.cli.common.interruptible`)."""

import os
import signal
import sys

from failures import interrupted
from repo_paths import REPO


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
    code, err = interrupted(
        [sys.executable, str(REPO / "scripts" / "demo.py"), "--workdir", str(tmp_path / "d")],
        ("[1/5] corpus",),  # the demo is building its corpus from WordNet
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert code == 130, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted (Ctrl-C): nothing partial was written"


def test_an_interrupted_run_stops_the_commands_it_started(tmp_path):
    """The demo's and the study's commands run as child processes: a Ctrl-C that reaches only
    the parent (``kill -INT``) must not leave them running, nor keep the parent waiting for them
    (one command, and two side by side)."""
    marker = tmp_path / "pids"
    child = [
        sys.executable,
        "-c",
        f"import os, time; open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
        "print('started', flush=True); time.sleep(60)",
    ]
    # Ctrl-C raises KeyboardInterrupt here as in a command (a test run started in the
    # background inherits SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_runs(tmp_path, child, marker)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_runs(tmp_path, child, marker):
    import logging
    import threading
    import time

    import pytest

    from truneg_fairseq.pipelines.study.run import Runner

    for jobs in ([(child, "one")], [(child, "a"), (child, "b")]):
        marker.write_text("")
        run = Runner(str(tmp_path), logging.getLogger("test"), echo=False)
        timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        start = time.time()
        with pytest.raises(KeyboardInterrupt):
            run.run_many(jobs, parallel=len(jobs))
        timer.cancel()
        assert time.time() - start < 30
        pids = [int(p) for p in marker.read_text().split()]
        assert len(pids) == len(jobs)
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive = open(f"/proc/{pid}/stat").read().split()[2] != "Z"
            except (ProcessLookupError, FileNotFoundError):
                alive = False
            assert not alive, f"command {pid} still runs"
