"""Child processes that end with their parent.

Inside :func:`children_end_with_us` every process forked from this one (worker pools, the pools
fairseq-preprocess starts, sentencepiece training) asks the kernel to SIGKILL it when its parent
dies (``prctl(PR_SET_PDEATHSIG)``, Linux), so a SIGKILL of the command leaves no worker running;
a SIGTERM kills the children started inside the block and then ends the command
(``SystemExit(143)``, so staged outputs are cleaned up as on any error).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from typing import List

_PR_SET_PDEATHSIG = 1
_state = {"active": 0, "forker": 0, "hooked": False}


def _libc(name: str):
    """A libc function, looked up once here: a forked child must not load libraries (a lock
    held by another thread at the fork would never be released in the child)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


_PRCTL, _SIGNAL = _libc("prctl"), _libc("signal")


def die_with_parent(parent: int = 0) -> None:
    """Have the kernel SIGKILL this process when its parent ends (Linux; elsewhere nothing).
    ``parent``: the pid that forked it; if it is gone already, end now."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if parent and os.getppid() != parent:
        os._exit(1)


def _before_fork() -> None:
    _state["forker"] = os.getpid()


def _after_fork_in_child() -> None:
    if not _state["active"]:
        return
    die_with_parent(_state["forker"])
    # the parent's SIGTERM handler is not the child's: a worker told to stop just stops (set
    # in C: Python's signal.signal refuses a child forked from a thread other than the main one)
    if _SIGNAL is not None:
        _SIGNAL(int(signal.SIGTERM), 0)  # SIG_DFL


def descendants(pid: int = 0) -> List[int]:
    """Pids of every live descendant of ``pid`` (default: this process), from /proc."""
    pid = pid or os.getpid()
    parents = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields and fields[0] != "Z":
            parents.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_all(pids: List[int]) -> None:
    """SIGKILL ``pids`` (the deepest first) and reap those that are this process's children."""
    for pid in reversed(pids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 5
    for pid in pids:
        while time.time() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours (a grandchild) or reaped already
                break
            if done:
                break
            time.sleep(0.01)


_started_before: List[set] = []


def _on_sigterm(signum, frame):
    before = _started_before[-1] if _started_before else set()
    kill_all([p for p in descendants() if p not in before])
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def children_end_with_us():
    """See the module docstring. Nested blocks are fine; the SIGTERM handler is installed only
    when the block runs in the main thread (and put back afterwards)."""
    if not _state["hooked"] and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
        _state["hooked"] = True
    main = threading.current_thread() is threading.main_thread()
    _started_before.append(set(descendants()) if main else set())
    old = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    _state["active"] += 1
    try:
        yield
    finally:
        _state["active"] -= 1
        if main:
            signal.signal(signal.SIGTERM, old)
        _started_before.pop()
