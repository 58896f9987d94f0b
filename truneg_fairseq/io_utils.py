"""Atomic file output: write to a temporary file beside the target, then rename over it."""

import contextlib
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: os.PathLike, mode: str = "w", **kwargs):
    """Like ``open(path, mode)`` for writing, but readers never see a partial file: on success
    the file appears at once with the usual permissions; on any error nothing is left behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


MARKER = ".truneg-output.json"


class OutputDirError(RuntimeError):
    """An output directory this command may not write: the message says why and what to do."""


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


def _check_target(path: Path, owner: str) -> None:
    """``path`` may be (re)written: missing, an empty directory, or an earlier output of the
    same command (its marker file). Anything else is refused: nothing is ever deleted that this
    command did not write."""
    if not path.exists():
        return
    if not path.is_dir():
        raise OutputDirError(f"{path} is a file, not a directory: choose a new output directory")
    if not any(path.iterdir()):
        return
    marker = path / MARKER
    recorded = None
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text()).get("command")
        except (ValueError, OSError):
            recorded = None
    if recorded == owner:
        return
    what = f"the output of `{recorded}`" if recorded else "files this command did not write"
    raise OutputDirError(
        f"{path} already holds {what}; {owner} writes only into a new (or empty) directory or into "
        "its own earlier output, and never deletes anything else. Give a new output directory"
    )


@contextlib.contextmanager
def output_lock(path: os.PathLike, log=None):
    """Hold the lock of output directory ``path`` (:func:`_lock`) for the ``with`` block."""
    import logging

    path = Path(os.path.abspath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(path, log or logging.getLogger(__name__).warning)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _lock(path: Path, log) -> Path:
    """One run at a time per output directory: a lock file beside it with the holder's pid."""
    lock = path.parent / f".{path.name}.lock"
    while True:
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
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return lock


def _recover(path: Path, log) -> None:
    """Clean up after killed runs: their unfinished ``.NAME.new-*`` directories are removed; an
    old output set aside (``.NAME.old-*``) just before a kill is put back when the new one never
    arrived, and removed otherwise."""
    for leftover in sorted(path.parent.glob(f".{path.name}.new-*")):
        log(f"removing {leftover}: the unfinished output of a run that was killed")
        shutil.rmtree(leftover, ignore_errors=True)
    for aside in sorted(path.parent.glob(f".{path.name}.old-*")):
        if path.exists():
            log(f"removing {aside}: the previous output, already replaced")
            shutil.rmtree(aside, ignore_errors=True)
        else:
            log(f"restoring {path} from {aside}: a run was killed while replacing it")
            os.replace(aside, path)


@contextlib.contextmanager
def atomic_dir(path: os.PathLike, owner: str, log=None):
    """Build a directory under a temporary name beside ``path`` and yield that name; on success
    it takes the place of ``path`` with the umask's permissions, as ``mkdir`` would.

    ``owner`` names the command (e.g. ``"convert_hf.py import"``); it is recorded in a marker
    file inside the output, and ``path`` must be missing, empty or an earlier output of the same
    command (:class:`OutputDirError` otherwise, before anything is written). One run at a time
    (a lock file beside ``path``); an earlier output is renamed aside, the new one renamed in,
    then the old one removed, so a kill at any moment leaves one of them whole, and the next run
    puts things right (:func:`_recover`). On any error only what this run created is removed."""
    import logging

    log = log or logging.getLogger(__name__).warning
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = _lock(path, log)
    except OSError as e:
        raise OutputDirError(f"{path}: cannot write there ({e.strerror or e}); choose a writable directory") from None
    tmp = None
    try:
        _recover(path, log)
        _check_target(path, owner)
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.new-{os.getpid()}-", dir=path.parent))
        except OSError as e:
            raise OutputDirError(f"{path}: cannot write there ({e.strerror or e}); choose a writable directory") from None
        with _write_errors(path):
            yield tmp
        with open(tmp / MARKER, "w") as f:
            json.dump({"command": owner}, f)
        # mkdtemp makes the directory private (0700), and some writers (safetensors) their files
        # (0600): the result gets what mkdir and open would give it
        os.chmod(tmp, 0o777 & ~_umask())
        for root, dirs, files in os.walk(tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o777 & ~_umask())
            for name in files:
                os.chmod(os.path.join(root, name), 0o666 & ~_umask())
        aside = None
        if path.exists():
            aside = path.parent / f".{path.name}.old-{os.getpid()}"
            os.replace(path, aside)
        os.replace(tmp, path)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        lock.unlink(missing_ok=True)


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EFBIG)


@contextlib.contextmanager
def _write_errors(path: Path):
    """A write that fails for lack of space or permission inside the block becomes one
    :class:`OutputDirError` naming ``path``."""
    try:
        yield
    except OSError as e:
        if e.errno in WRITE_ERRNOS:
            raise OutputDirError(f"{path}: writing failed ({e.strerror}): free space or choose another "
                                 "directory; nothing was replaced") from None
        raise
    except Exception as e:  # torch.save and safetensors report a full disk in their own errors
        if _write_failure(e):
            raise OutputDirError(f"{path}: writing failed (disk full or a file-size limit): "
                                 "free space or choose another directory; nothing was replaced") from None
        raise
_WRITE_FAILURE_TEXTS = ("inline_container", "No space left", "File too large", "Disk quota", "os error 28",
                        "os error 27", "os error 122")


def _write_failure(e: BaseException) -> bool:
    """A writer's own error (torch's zip writer, safetensors) that is a full disk underneath."""
    return any(t in str(e) for t in _WRITE_FAILURE_TEXTS)


def _owned_by(out: Path, owner: str) -> bool:
    try:
        return json.loads((out / MARKER).read_text()).get("command") == owner
    except (OSError, ValueError, AttributeError):
        return False


def _recover_entries(out: Path, tag: str, names, log) -> None:
    """Put right what a killed :func:`staged_entries` run left in ``out``: an unfinished staging
    directory is removed; when the kill came during the swap, the old entries set aside go back,
    so ``out`` again holds one whole earlier set."""
    for stage in sorted(out.glob(f".{tag}.new-*")):
        aside = out / stage.name.replace(".new-", ".old-", 1)
        if aside.is_dir():
            log(f"restoring the previous outputs of {out} from {aside}: a run was killed while replacing them")
            if (aside / _ASIDE_DONE).exists():  # every old entry is aside: what is in out is new
                for name in names:
                    if (out / name).exists() or (out / name).is_symlink():
                        _remove(out / name)
            for entry in aside.iterdir():
                if entry.name != _ASIDE_DONE:
                    os.replace(entry, out / entry.name)
            shutil.rmtree(aside, ignore_errors=True)
        log(f"removing {stage}: the unfinished output of a run that was killed")
        shutil.rmtree(stage, ignore_errors=True)
    for aside in sorted(out.glob(f".{tag}.old-*")):  # the new set is whole: the old one goes
        log(f"removing {aside}: the previous outputs, already replaced")
        shutil.rmtree(aside, ignore_errors=True)
    for tmp in out.glob(f".{MARKER}.*.tmp"):  # a marker being written when the run was killed
        tmp.unlink(missing_ok=True)


_ASIDE_DONE = ".all-set-aside"


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


@contextlib.contextmanager
def staged_entries(out_dir: os.PathLike, owner: str, names, log=None):
    """Write a set of named outputs (files or directories) inside a shared directory as one unit.

    ``out_dir`` may hold other files (they are never touched); of ``names``, those present must
    come from an earlier run of ``owner`` (its marker file in ``out_dir``), else
    :class:`OutputDirError` before anything is written. The ``with`` block writes the new entries
    into the yielded staging directory (inside ``out_dir``); on success the old entries are set
    aside, the new ones moved in, then the old ones removed. On an error nothing of ``out_dir``
    changes; after a kill the next run restores one whole set (:func:`_recover_entries`).
    Call it under :func:`output_lock`."""
    import logging

    log = log or logging.getLogger(__name__).warning
    out = Path(os.path.abspath(out_dir))
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"{out} is a file, not a directory: choose a new output directory")
    tag = owner.split()[0].replace("/", "_")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        _recover_entries(out, tag, names, log)
        present = [n for n in names if (out / n).exists()]
        if present and not _owned_by(out, owner):
            raise OutputDirError(
                f"{out} already holds {', '.join(present)}, not written by {owner} (no marker {MARKER} of it); "
                f"{owner} never replaces what it did not write. Give a new output directory, or move those away"
            )
        stage = out / f".{tag}.new-{os.getpid()}"
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir()
    except OSError as e:
        raise OutputDirError(f"{out}: cannot write there ({e.strerror or e}); choose a writable directory") from None
    try:
        with _write_errors(out):
            yield stage
        with atomic_open(out / MARKER, "w") as f:  # before the swap: both sets are this owner's
            json.dump({"command": owner, "entries": list(names)}, f)
        aside = out / f".{tag}.old-{os.getpid()}"
        aside.mkdir()
        try:
            for name in names:
                if (out / name).exists() or (out / name).is_symlink():
                    os.replace(out / name, aside / name)
            (aside / _ASIDE_DONE).touch()
            for name in names:
                if (stage / name).exists():
                    os.replace(stage / name, out / name)
            stage.rmdir()
        except BaseException:
            _recover_entries(out, tag, names, log)  # the old set back, whole
            raise
        shutil.rmtree(aside, ignore_errors=True)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
