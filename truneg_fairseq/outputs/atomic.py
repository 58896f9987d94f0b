"""Atomic file output (write to a temporary file beside the target, then rename over it) and
the one translation of a failed write (full disk, quota, file-size limit, read-only or
forbidden directory) into an error that names the output and the fix."""

import contextlib
import errno
import os
import secrets
import tempfile
from pathlib import Path

from .output_errors import OutputDirError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temp_beside(path: os.PathLike, suffix: str = ".tmp") -> Path:
    """A temporary name for a file written in place of ``path``: in the same directory (so the
    final ``os.replace`` is atomic), hidden, unique to this process and call (pid and a random
    part), so two writers of the same output never share it."""
    path = Path(path)
    return path.parent / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}"


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


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EFBIG, errno.EPERM)

_WRITE_FAILURE_TEXTS = (
    "inline_container",
    "No space left",
    "File too large",
    "Disk quota",
    "Read-only file system",
    "os error 28",
    "os error 27",
    "os error 30",
    "os error 122",
    " requested and ",  # numpy's short write (ndarray.tofile): "N requested and M written"
)


def write_failure(e: BaseException) -> bool:
    """Whether ``e`` is a write that failed for lack of space or permission: an ``OSError`` of
    :data:`WRITE_ERRNOS`, or a writer's own error (torch's zip writer, safetensors, numpy) that
    is one underneath."""
    if isinstance(e, OSError) and e.errno in WRITE_ERRNOS:
        return True
    return any(t in str(e) for t in _WRITE_FAILURE_TEXTS)


def write_failure_message(path, e: BaseException, what: str = "nothing was replaced") -> str:
    """The one line said of a failed write of ``path``."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else "disk full or a file-size limit"
    return f"{path}: writing failed ({why}): free space or choose another directory; {what}"


@contextlib.contextmanager
def write_errors(path, error=OutputDirError, what: str = "nothing was replaced"):
    """A write that fails for lack of space or permission inside the block becomes one
    ``error`` (default :class:`OutputDirError`) naming ``path``; other errors pass."""
    try:
        yield
    except Exception as e:
        if isinstance(e, error) or not write_failure(e):
            raise
        raise error(write_failure_message(path, e, what)) from None
