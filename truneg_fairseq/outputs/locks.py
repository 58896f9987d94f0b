"""One run at a time per output: a lock file beside the output (``.NAME.lock``) that holds the
pid of the run writing it.

Written here rather than taken from the ``filelock`` package: its Unix lock (``flock``) stays on
disk after release and cannot say which run holds it, while these commands promise both a lock
that is gone once the run ends and an error that names the holder's pid; a lock left by a run
that was killed is recognised (its pid is gone) and removed, with a log line. Every failure to
take or release the lock (a lock file that cannot be removed or read, a directory without write
permission) is one :class:`OutputDirError` naming the lock file and the fix."""

import contextlib
import logging
import os
from pathlib import Path

from .errors import OutputDirError


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


def lock_path(path: Path) -> Path:
    """The lock file of output ``path``."""
    return path.parent / f".{path.name}.lock"


def _cannot(lock: Path, e: OSError) -> OutputDirError:
    return OutputDirError(
        f"{lock}: the lock file of {lock.parent / lock.name[1:-5]} cannot be taken ({e.strerror or e}); "
        f"if no run is writing there, remove {lock} by hand (it may be read-only or immutable: "
        "chmod/chattr -i it first), or make its directory writable, or choose another output"
    )


def _lock(path: Path, log) -> Path:
    """Take the lock of ``path`` (see the module docstring); returns the lock file."""
    lock = lock_path(path)
    for _ in range(100):  # a stale lock is removed and the lock taken again; never forever
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(lock.read_text().strip() or 0)
            except (ValueError, OSError):
                holder = 0
            if _pid_alive(holder) and holder != os.getpid():
                raise OutputDirError(
                    f"{path} is being written by another run (pid {holder}, lock {lock}); wait for it, or "
                    "choose another output directory"
                ) from None
            log(f"removing the stale lock {lock} of a run that ended (pid {holder})")
            try:
                if lock.is_dir() and not lock.is_symlink():
                    lock.rmdir()
                else:
                    lock.unlink(missing_ok=True)
            except OSError as e:
                raise _cannot(lock, e) from None
            continue
        except OSError as e:  # a read-only or forbidden directory, a full disk
            raise OutputDirError(
                f"{path}: cannot write there ({e.strerror or e}: its lock file {lock} cannot be "
                "created); choose a writable directory"
            ) from None
        try:
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            lock.unlink(missing_ok=True)
            raise _cannot(lock, e) from None
        return lock
    raise OutputDirError(f"{lock}: the lock keeps reappearing; is another run starting there?")


def release(lock: Path) -> None:
    """Remove a lock this run took (a lock that cannot be removed is left, said in a log line:
    the next run sees its pid gone and takes it over)."""
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
