"""Output locks name their owner (host, pid, the process's start time, the boot id): a lock whose
process is gone or is now another process is taken over, a lock of a running process (this very
one included) is respected, one of another host is an error saying how to remove it; of runs that
find the same stale lock exactly one takes it. Temporary files are this process's and call's own:
two processes writing the same output leave one of their files whole, and nothing else."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from repo_paths import REPO

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.outputs import atomic_dir, locks, output_lock


def _start_of(pid):
    return locks._proc_stat(pid)[1]


def _write_lock(path, **fields):
    record = {"pid": 1, "host": socket.gethostname(), "start": "0", "boot": locks._boot_id()}
    record.update(fields)
    path.write_text(json.dumps(record))
    return path.read_bytes()


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")


@needs_proc
def test_a_lock_recorded_by_another_process_under_a_live_pid_is_taken_over(tmp_path):
    lock = tmp_path / ".out.lock"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for pid in (1, sleeper.pid):  # pid 1 of a container; a pid reused since
            wrong = str(int(_start_of(pid)) + 12345)
            _write_lock(lock, pid=pid, start=wrong)
            said = []
            with output_lock(tmp_path / "out", log=said.append):
                assert json.loads(lock.read_text())["pid"] == os.getpid()
            assert not lock.exists() and f"stale lock {lock}" in said[0]
        # the right start time, but of a boot before this one
        _write_lock(lock, pid=sleeper.pid, start=_start_of(sleeper.pid), boot="another-boot")
        with atomic_dir(tmp_path / "out", "a command") as work:
            (work / "a.txt").write_text("a")
        assert not lock.exists()
        # the running process itself: held
        _write_lock(lock, pid=sleeper.pid, start=_start_of(sleeper.pid))
        with pytest.raises(OutputDirError, match=rf"another run \(pid {sleeper.pid}, lock "):
            with output_lock(tmp_path / "out"):
                pass
        assert lock.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    with output_lock(tmp_path / "out"):  # it ended: taken over
        pass


@needs_proc
def test_a_lock_of_this_very_process_is_respected(tmp_path):
    with output_lock(tmp_path / "out"):
        lock = tmp_path / ".out.lock"
        record = lock.read_bytes()
        assert json.loads(record)["start"] == _start_of(os.getpid())
        with pytest.raises(OutputDirError, match=rf"another run \(pid {os.getpid()}, "):
            with atomic_dir(tmp_path / "out", "a command"):
                pass
        assert lock.read_bytes() == record
    assert not lock.exists()


@needs_proc
def test_an_older_lock_holding_only_a_pid_is_taken_over_when_that_process_is_younger(tmp_path):
    lock = tmp_path / ".out.lock"
    lock.write_text("1")  # pid 1 started before the lock was written: it may hold it
    with pytest.raises(OutputDirError, match=r"another run \(pid 1, "):
        with output_lock(tmp_path / "out"):
            pass
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(str(sleeper.pid))
        os.utime(lock, (time.time() - 3600,) * 2)  # written an hour before that process started
        with output_lock(tmp_path / "out"):
            pass
        assert not lock.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_lock_of_another_host_is_an_error_saying_how_to_remove_it(tmp_path):
    lock = tmp_path / ".out.lock"
    record = _write_lock(lock, pid=999999999, host="elsewhere.example")
    with pytest.raises(OutputDirError) as e:
        with output_lock(tmp_path / "out"):
            pass
    assert "by a run on host elsewhere.example (pid 999999999" in str(e.value)
    assert f"remove {lock} by hand" in str(e.value)
    assert lock.read_bytes() == record


_RACER = """
import os, sys, time
from pathlib import Path
# the output writers alone (PYTHONPATH is the package's folder): standard library only
from outputs import OutputDirError, atomic_dir
root, others = Path(sys.argv[1]), int(sys.argv[2])
go = root / "go"
while not go.exists():  # all start at once
    pass
try:
    with atomic_dir(root / "out", "a command", log=lambda m: None) as work:
        (work / "a.txt").write_text(str(os.getpid()))
        (root / f"won-{os.getpid()}").touch()
        t0 = time.monotonic()  # hold the lock until the other run has given up
        while len(list(root.glob("lost-*"))) < others and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        assert work.is_dir() and (work / "a.txt").read_text() == str(os.getpid()), "stage gone"
except OutputDirError as e:
    (root / f"lost-{os.getpid()}").write_text(str(e))
"""


def test_of_runs_finding_the_same_stale_lock_one_takes_it(tmp_path):
    racers_n = 3
    for attempt in range(8):
        root = tmp_path / str(attempt)
        root.mkdir()
        _write_lock(root / ".out.lock", pid=999999999)  # a run that was killed
        racers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RACER,
                    str(root),
                    str(racers_n - 1),
                ],
                env={**os.environ, "PYTHONPATH": str(REPO / "truneg_fairseq")},
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(racers_n)
        ]
        time.sleep(0.3)  # both started and waiting
        (root / "go").touch()
        errors = [p.communicate(timeout=60)[1] for p in racers]
        assert [p.returncode for p in racers] == [0] * racers_n, errors
        won, lost = sorted(root.glob("won-*")), sorted(root.glob("lost-*"))
        assert len(won) == 1 and len(lost) == racers_n - 1, (won, lost)
        assert all("being written by another run" in p.read_text() for p in lost)
        winner = won[0].name.split("-")[1]
        assert (root / "out" / "a.txt").read_text() == winner
        left = {p.name for p in root.iterdir()} - {p.name for p in won + lost}
        assert left == {"go", "out"}


def _write_many(kind, src, dst, n, go):
    """A writer process: ``n`` writes of ``src``'s bytes to ``dst`` once ``go`` is set."""
    from fairseq import checkpoint_utils

    from truneg_fairseq.compat import atomic_copy_file
    from truneg_fairseq.outputs import atomic_open

    data = src.read_bytes()
    go.wait(30)
    for _ in range(n):
        if kind == "copy":  # fairseq's copy of a saved checkpoint to checkpoint_last.pt, mended
            atomic_copy_file(str(src), str(dst))
        elif kind == "save":  # fairseq's save of a checkpoint, mended
            checkpoint_utils.torch_persistent_save({"data": data}, str(dst))
        else:
            with atomic_open(dst, "wb") as f:
                for i in range(0, len(data), 4096):
                    f.write(data[i : i + 4096])


def _content(path, kind):
    if kind != "save":
        return path.read_bytes()
    import torch

    return torch.load(path, weights_only=True)["data"]


@pytest.mark.parametrize("kind", ["save", "copy", "atomic_open"])
def test_two_processes_writing_one_output_leave_one_whole_source(tmp_path, kind):
    """fairseq-train's checkpoint save and its copy to checkpoint_last.pt (as the plugin mends
    them) and the atomic file writer, each by two processes at once, many times: every read and
    the end result is one of the two sources, byte for byte, and no temporary file is left."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")  # the plugin is imported (its mends installed)
    sources = []
    for name, byte in (("a.pt", b"a"), ("b.pt", b"b")):
        (tmp_path / name).write_bytes(byte * 300_000 + os.urandom(1000))
        sources.append((tmp_path / name).read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "checkpoint_last.pt"
    go = ctx.Event()
    writers = [
        ctx.Process(target=_write_many, args=(kind, tmp_path / n, dst, 100, go))
        for n in ("a.pt", "b.pt")
    ]
    for w in writers:
        w.start()
    go.set()
    reads = 0
    while any(w.is_alive() for w in writers):
        if dst.exists():
            assert _content(dst, kind) in sources
            reads += 1
        time.sleep(0.005)
    for w in writers:
        w.join()
    assert [w.exitcode for w in writers] == [0, 0]
    assert _content(dst, kind) in sources and reads > 0
    assert [p.name for p in out.iterdir()] == ["checkpoint_last.pt"]


@pytest.mark.slow
def test_two_fairseq_train_runs_on_one_save_dir_one_refusal(data_bin, tmp_path):
    """With the plugin loaded, fairseq-train locks its --save-dir for the run: a second run is one
    refusal naming the directory and the holder; a killed run's lock is taken over; runs one
    after another in one process each take and release it."""
    from fairseq_runs import TINY_ROBERTA, fairseq_train, train_argv

    save = tmp_path / "ckpt"
    lock = tmp_path / ".ckpt.lock"
    tiny = [*TINY_ROBERTA, "--criterion", "masked_lm"]
    cmd = [sys.executable, "-m", "fairseq_cli.train", *train_argv(data_bin, save, tiny)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    first = subprocess.Popen(
        [*cmd, "--max-update", "100000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        t0 = time.time()
        while not lock.exists():
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.time() - t0 < 60, "no lock"
            time.sleep(0.1)
        # a second run (in this process) while the first trains
        second = fairseq_train(data_bin, save, [*tiny, "--max-update", "2"], check=False)
        assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr
        line = second.stderr.strip().splitlines()[-1]
        assert "| ERROR | fairseq_cli.train |" in line, second.stderr
        assert f"{save} is being written by another run (pid {first.pid}," in line
        assert "Loaded checkpoint" not in second.stdout and first.poll() is None
    finally:
        first.kill()
        first.communicate()
    assert lock.exists()  # left by the killed run
    said = []
    for updates in ("1", "2"):  # the stale lock taken over; then taken and released again
        out = fairseq_train(data_bin, save, [*tiny, "--max-update", updates])
        said.append(out.stdout + out.stderr)
        assert not lock.exists()
    assert f"removing the stale lock {lock}" in said[0] and "stale lock" not in said[1]
