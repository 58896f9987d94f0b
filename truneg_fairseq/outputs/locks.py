"""One run at a time per output: a lock file beside the output (``.NAME.lock``) that records
which process writes it: host name, pid, the process's start time and the machine's boot id.

Written here rather than taken from the ``filelock`` package: its Unix lock (``flock``) stays on
disk after release and cannot say which run holds it, while these commands promise both a lock
that is gone once the run ends and an error that names the holder. A lock left by a run that was
killed is recognised and taken over, with a log line: its pid is gone, or it is now another
process (its start time differs: a reused pid, or pid 1 of a container), or the machine was
restarted since (another boot id). A lock of another host is never guessed about: the error
says so and how to remove it.

The lock file appears whole (written beside it, then hard-linked to its name, so no run ever
reads a half-written record), and a stale lock is taken over by renaming it to a name of this
run's own first: of runs that find the same stale lock only one rename succeeds, the others try
again and find the winner's lock. Every failure to take or release the lock (a lock file that
cannot be removed or read, a directory without write permission) is one
:class:`OutputDirError` naming the lock file and the fix."""

import contextlib
import errno
import json
import logging
import os
import secrets
import socket
import time
from pathlib import Path

from .output_errors import OutputDirError

_HELD = {}  # lock file -> the record this process wrote into it


def _proc_stat(pid: int):
    """(state, start time) of process ``pid`` from /proc/PID/stat (start time: field 22, clock
    ticks since boot); None where there is no such process; "" where /proc cannot tell."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except FileNotFoundError:
        return None if os.path.isdir("/proc/self") else ""
    except OSError:
        return ""
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": field 3 on
    return (fields[0], fields[19]) if len(fields) > 19 else ""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _record() -> dict:
    stat = _proc_stat(os.getpid()) or ("", "")
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "start": stat[1],
        "boot": _boot_id(),
        "token": secrets.token_hex(8),
    }


def _read(lock: Path):
    """(raw bytes, record) of a lock file: the record is a dict; an old lock holding only a pid
    is ``{"pid": N}``; None for a missing file, {} for one that is unreadable or empty."""
    try:
        raw = lock.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError:
        return b"", {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return raw, {}
    if isinstance(data, int) and not isinstance(data, bool):
        return raw, {"pid": data}
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return raw, {}
    return raw, data


def _started_after(start: str, when: float) -> bool:
    """Whether a process of start time ``start`` (clock ticks since boot) started after the
    moment ``when`` (seconds since the epoch)."""
    try:
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return btime + int(start) / os.sysconf("SC_CLK_TCK") > when + 1
    except (OSError, ValueError, StopIteration):
        return False


def _running(rec: dict, mtime: float) -> bool:
    """Whether the process of lock record ``rec`` (of this host; the lock file last changed at
    ``mtime``) still runs."""
    pid = rec["pid"]
    boot, now_boot = rec.get("boot") or "", _boot_id()
    if boot and now_boot and boot != now_boot:
        return False  # the machine was restarted since
    stat = _proc_stat(pid)
    if stat is None:
        return False
    if stat == "":  # no /proc here: the pid alone tells
        return _pid_alive(pid)
    state, start = stat
    if state in ("Z", "X"):  # killed, not yet reaped
        return False
    if "start" not in rec:  # a lock of an older version: the pid only, so its file's age tells
        return pid != os.getpid() and not _started_after(start, mtime)
    return rec["start"] == start


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _cannot(lock: Path, e: OSError) -> OutputDirError:
    return OutputDirError(
        f"{lock}: the lock file of {lock.parent / lock.name[1:-5]} cannot be taken ({e.strerror or e}); "
        f"if no run is writing there, remove {lock} by hand (it may be read-only or immutable: "
        "chmod/chattr -i it first), or make its directory writable, or choose another output"
    )


def lock_path(path: Path) -> Path:
    """The lock file of output ``path``."""
    return path.parent / f".{path.name}.lock"


def _own_name(lock: Path, what: str) -> Path:
    return lock.parent / f"{lock.name}.{what}-{os.getpid()}-{secrets.token_hex(4)}"


def _create(path: Path, lock: Path, data: bytes) -> bool:
    """Make ``lock`` holding ``data`` unless it exists (False then)."""
    new = _own_name(lock, "new")
    try:
        try:
            fd = os.open(new, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.link(new, lock)  # the lock appears whole, or not at all
            return True
        except FileExistsError:
            return False
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS) or (
                not new.exists()
            ):
                raise
        # a file system without hard links: created empty, then written
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError:
            lock.unlink(missing_ok=True)
            raise
        return True
    except FileExistsError:
        return False
    except OSError as e:  # a read-only or forbidden directory, a full disk
        raise OutputDirError(
            f"{path}: cannot write there ({e.strerror or e}: its lock file {lock} cannot be "
            "created); choose a writable directory"
        ) from None
    finally:
        new.unlink(missing_ok=True)


def _take_stale(lock: Path, seen: bytes, log) -> None:
    """Remove the stale lock whose bytes were ``seen``, so that one run only does: it is renamed
    to a name of this run first (a run that finds it gone tries again); a lock that is no longer
    the one judged stale (another run took the stale one over meanwhile) is put back."""
    aside = _own_name(lock, "stale")
    try:
        os.rename(lock, aside)
    except FileNotFoundError:
        return
    except OSError as e:
        raise _cannot(lock, e) from None
    try:
        now = aside.read_bytes() if not aside.is_dir() else seen
    except OSError:
        now = b""
    if now != seen:
        try:
            os.link(aside, lock)
        except OSError:
            log(f"{lock}: the lock of another run was moved to {aside}; that run holds it")
            return
        aside.unlink(missing_ok=True)
        return
    try:
        if aside.is_dir() and not aside.is_symlink():
            aside.rmdir()
        else:
            aside.unlink()
    except OSError as e:
        raise _cannot(aside, e) from None


def _lock(path: Path, log) -> Path:
    """Take the lock of ``path`` (see the module docstring); returns the lock file."""
    lock = lock_path(path)
    mine = _record()
    data = json.dumps(mine).encode()
    for _ in range(200):  # a stale lock is removed and the lock taken again; never forever
        if _create(path, lock, data):
            _HELD[str(lock)] = data
            return lock
        raw, rec = _read(lock)
        if rec is None:
            continue  # released meanwhile
        host = rec.get("host")
        if rec and host and host != mine["host"]:
            raise OutputDirError(
                f"{path} is locked by a run on host {host} (pid {rec['pid']}, lock {lock}); this host "
                f"cannot tell whether it still runs. Wait for it, or, if no run is writing there, remove "
                f"{lock} by hand"
            )
        if rec and _running(rec, _mtime(lock)):
            raise OutputDirError(
                f"{path} is being written by another run (pid {rec['pid']}, lock {lock}); wait for it, "
                f"or choose another output directory (if no run is writing there, remove {lock})"
            )
        if not rec:
            young = time.time() - _mtime(lock) < 2
            if young and not lock.is_dir():  # maybe being written (no hard links there): wait
                time.sleep(0.05)
                continue
        pid = rec.get("pid", "unknown") if rec else "unknown"
        log(f"removing the stale lock {lock} of a run that ended (pid {pid})")
        _take_stale(lock, raw, log)
    raise OutputDirError(f"{lock}: the lock keeps reappearing; is another run starting there?")


def release(lock: Path) -> None:
    """Remove a lock this run took (a lock that cannot be removed is left, said in a log line:
    the next run sees its process gone and takes it over)."""
    ours = _HELD.pop(str(lock), None)
    raw, _ = _read(lock)
    if raw is None:
        return
    if ours is not None and raw != ours:
        logging.getLogger(__name__).warning(f"{lock} is no longer this run's lock: left in place")
        return
    try:
        lock.unlink(missing_ok=True)
    except OSError as e:
        logging.getLogger(__name__).warning(f"could not remove the lock {lock} ({e.strerror or e})")


def writable_parent(path: os.PathLike) -> Path:
    """``path`` made absolute, its parent directory created: one that cannot be is an
    :class:`OutputDirError` naming ``path``."""
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputDirError(
            f"{path}: cannot write there ({e.strerror or e}); choose a writable directory"
        ) from None
    return path


@contextlib.contextmanager
def output_lock(path: os.PathLike, log=None):
    """Hold the lock of output ``path`` (:func:`_lock`) for the ``with`` block."""
    path = writable_parent(path)
    lock = _lock(path, log or logging.getLogger(__name__).warning)
    try:
        yield
    finally:
        release(lock)
