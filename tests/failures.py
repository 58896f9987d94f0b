"""Helpers of the tests of failures: a file-size limit standing in for a full disk (in this
process or a child's), an immutable file, and the one error line a refused fairseq-train ends
with."""

import contextlib
import re
import resource
import shutil
import signal
import subprocess

import pytest


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Files of this process larger than ``limit`` bytes cannot be written (EFBIG, as on a full
    disk; Python ignores SIGXFSZ), for the ``with`` block only."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def file_size_limit_of_child(limit: int):
    """preexec_fn of a child process: files larger than ``limit`` bytes cannot be written
    (EFBIG), as on a full disk."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@contextlib.contextmanager
def immutable(path):
    """``path`` made immutable (chattr +i: not even root may remove it); skipped where chattr
    is missing or the filesystem has no such flag."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("kind", ["output_lock", "atomic_dir"])
def one_fairseq_error(proc, *wanted):
    """The one ERROR line of fairseq's log format a refused fairseq-train ends with."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [
        line for line in proc.stderr.splitlines() if " | ERROR | fairseq_cli.train | " in line
    ]
    assert len(errors) == 1, proc.stderr[-3000:]
    for w in wanted:
        assert w in errors[0], errors[0]
    return errors[0]


def full_disk_run(script, argv, out, limit):
    """``script argv`` writing ``out`` on a disk that fills up after ``limit`` bytes: one error
    naming the flag and the file, no file (nor temporary file) left in its directory."""
    from command_runs import run_script

    with file_size_limit(limit):
        proc = run_script(script, [str(a) for a in argv])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert re.search(re.escape(f"{out}: writing failed (") + r"[^)]+\): free space", proc.stderr)
    assert not [p.name for p in out.parent.iterdir()]
    return proc


def interrupted(argv, markers, **popen) -> tuple:
    """Run ``argv``, send it Ctrl-C (SIGINT) once a line of its standard output holds one of
    ``markers`` (or it ends), and return (exit status, standard error). Started as from a terminal: a test run
    in the background ignores SIGINT, and an ignored signal stays ignored in the processes it
    starts."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **popen,
    )
    try:
        for line in proc.stdout:
            if any(m in line for m in markers):
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err
