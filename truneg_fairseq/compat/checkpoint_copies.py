"""Atomic checkpoint copies (``atomic_checkpoint_copies``) and saves of their own
(``atomic_checkpoint_saves``, below): fairseq writes the first checkpoint
of a save atomically (a ``.tmp`` file, then a rename) but copies it to the others
(``checkpoint_last.pt``, ``checkpoint_best.pt``) with a plain ``PathManager.copy``; a job
killed during that copy (SIGTERM on preemption) leaves a truncated ``checkpoint_last.pt`` and
the resume fails (``PytorchStreamReader failed reading zip archive``). The shim makes local
copies atomic: copy to a temporary file of this copy's own in the same directory
(``.<dst>.PID-RANDOM.tmp``: two runs copying to the same file never share it), fsync,
``os.replace``, so ``checkpoint_last.pt`` is always one whole checkpoint; a copy that fills the
disk is one error and leaves no temporary file. Remote (iopath) paths keep fairseq's copy.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import os
import shutil

from truneg_fairseq.checkpoint_schema.load_errors import checkpoint_write_errors

from .wrapping import wrap_once


def atomic_copy_file(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` so that ``dst`` is never seen half-written, even if the process is
    killed: the data go to a temporary file of this call beside it
    (:func:`~truneg_fairseq.outputs.temp_beside`), are fsynced, then renamed over ``dst``; any
    failure removes the temporary file. A copy that fails for lack of space or permission (a
    full disk, a file-size limit) is one
    :class:`~truneg_fairseq.errors.CheckpointError` naming ``dst``
    (:func:`~truneg_fairseq.checkpoint_schema.load_errors.checkpoint_write_errors`); ``dst`` stays as it was."""
    from truneg_fairseq.outputs import temp_beside

    tmp = temp_beside(dst)
    with checkpoint_write_errors(dst, tmp):
        try:
            with open(src, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)
                fout.flush()
                os.fsync(fout.fileno())
            os.replace(tmp, dst)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
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

    def atomic_local_copies(original):
        def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
            if PathManager.path_requires_pathmanager(
                src_path
            ) or PathManager.path_requires_pathmanager(dst_path):
                return original(src_path, dst_path, overwrite=overwrite)
            if os.path.exists(dst_path) and not overwrite:
                return False  # as iopath does
            atomic_copy_file(src_path, dst_path)
            return True  # fairseq asserts the result

        return copy

    wrap_once(PathManager, "copy", atomic_local_copies, marker="truneg_atomic")


def atomic_checkpoint_saves() -> None:
    """fairseq's own save (``checkpoint_utils.torch_persistent_save``) writes ``<file>.tmp``,
    then renames it: two runs saving the same file share that name and one can rename the
    other's half-written file into place. Local saves here write a temporary file of their own
    (:func:`~truneg_fairseq.outputs.temp_beside`), removed on any failure; a save that fails for
    lack of space is one :class:`~truneg_fairseq.errors.CheckpointError` (fairseq writes
    again into the same, partly written file twice, 2.5 s apart, first). Asynchronous and
    remote (iopath) saves keep fairseq's way."""
    import torch
    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    def saves_of_their_own(original):
        def torch_persistent_save(obj, filename, async_write: bool = False):
            if async_write or PathManager.path_requires_pathmanager(filename):
                return original(obj, filename, async_write=async_write)
            from truneg_fairseq.outputs import temp_beside

            tmp = temp_beside(filename)
            with checkpoint_write_errors(filename, tmp):
                try:
                    with open(tmp, "wb") as f:  # once: a retry would append to a partial file
                        torch.save(obj, f)
                    os.replace(tmp, filename)
                except BaseException:
                    tmp.unlink(missing_ok=True)
                    raise

        return torch_persistent_save

    wrap_once(checkpoint_utils, "torch_persistent_save", saves_of_their_own, marker="truneg_atomic")
