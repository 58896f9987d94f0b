"""Atomic checkpoint copies (``atomic_checkpoint_copies``): fairseq writes the first checkpoint
of a save atomically (a ``.tmp`` file, then a rename) but copies it to the others
(``checkpoint_last.pt``, ``checkpoint_best.pt``) with a plain ``PathManager.copy``; a job
killed during that copy (SIGTERM on preemption) leaves a truncated ``checkpoint_last.pt`` and
the resume fails (``PytorchStreamReader failed reading zip archive``). The shim makes local
copies atomic: copy to ``<dst>.tmp`` in the same directory, fsync, ``os.replace``, so
``checkpoint_last.pt`` is always the old or the new checkpoint, whole; a copy that fills the disk
is one error and leaves no ``.tmp``. Remote (iopath) paths keep fairseq's copy.
"""

from __future__ import annotations

import os
import shutil

from .checkpoint_errors import checkpoint_write_errors


def atomic_copy_file(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` so that ``dst`` is never seen half-written, even if the process is
    killed: the data go to ``<dst>.tmp`` beside it (overwritten by the next copy, so a killed copy
    leaves no growing litter), are fsynced, then renamed over ``dst``. A copy that fails for
    lack of space or permission (a full disk, a file-size limit) removes the ``.tmp`` and is one
    :class:`~.checkpoint_errors.CheckpointError` naming ``dst``
    (:func:`~.checkpoint_errors.checkpoint_write_errors`); ``dst`` stays as it was."""
    tmp = f"{dst}.tmp"
    with checkpoint_write_errors(dst, tmp):
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)
            fout.flush()
            os.fsync(fout.fileno())
        os.replace(tmp, dst)
    try:  # make the rename itself durable (a crash of the machine, not only of the process)
        fd = os.open(os.path.dirname(os.path.abspath(dst)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_checkpoint_copies() -> None:
    """Make fairseq's ``PathManager.copy`` atomic for local paths (see the module docstring)."""
    from fairseq.file_io import PathManager

    original = PathManager.copy
    if getattr(original, "truneg_atomic", False):  # installed already
        return

    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if PathManager.path_requires_pathmanager(src_path) or PathManager.path_requires_pathmanager(
            dst_path
        ):
            return original(src_path, dst_path, overwrite=overwrite)
        if os.path.exists(dst_path) and not overwrite:
            return False  # as iopath does
        atomic_copy_file(src_path, dst_path)
        return True  # fairseq asserts the result

    copy.truneg_atomic = True
    PathManager.copy = staticmethod(copy)
