"""Atomic file output: write to a temporary file beside the target, then rename over it."""

import contextlib
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


@contextlib.contextmanager
def atomic_dir(path: os.PathLike):
    """Build a directory under a temporary name beside ``path`` and yield that name; on success
    it replaces ``path`` (an older ``path`` is removed) with the umask's permissions, as ``mkdir``
    would; on any error it is deleted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        # mkdtemp makes the directory private (0700); the result gets what mkdir would give it
        os.chmod(tmp, 0o777 & ~_umask())
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
