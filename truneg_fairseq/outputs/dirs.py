"""Output directories written as one unit: :func:`atomic_dir` (a directory of one command) and
:func:`staged_entries` (a command's entries in a shared directory)."""

import contextlib
import logging
import os
import shutil
from pathlib import Path

from .atomic import _umask, write_errors
from .locks import _lock, release, writable_parent
from .marker import MARKER, _owned_files
from .output_errors import OutputDirError
from .swap import _finish_stage, _plan, _recover_all, _swap


@contextlib.contextmanager
def atomic_dir(path: os.PathLike, owner: str, log=None, inputs=None):
    """Build the files of output directory ``path`` under a temporary directory beside it and
    yield that; on success they take their place in ``path``, with the umask's permissions.

    ``owner`` names the command (e.g. ``"convert_hf.py import"``). ``path`` must be missing,
    empty, or an earlier output of the same command: its marker file lists the files that run
    wrote (names, sizes, sha256 of small ones) and is trusted only when they are on disk as
    recorded (:func:`_owned_files`); :class:`OutputDirError` otherwise, before anything is
    written. Only those files are replaced or removed: whatever else the user put in ``path``
    stays, and so does every file of ``inputs`` (``{flag: path}``, the run's input files or
    directories); a new file that would land on one of those is an error naming it.

    A missing ``path`` appears at once (one rename). An existing one is updated file by file
    (:func:`_swap`): a crash part way leaves the old set aside, and the next run puts the old
    set back, whole, before it does anything (and says so). One run at a time (a lock file
    beside ``path``). On any error only what this run created is removed."""
    log = log or logging.getLogger(__name__).warning
    path = writable_parent(path)
    lock = _lock(path, log)
    prefix = f".{path.name}"
    stage = path.parent / f"{prefix}.new-{os.getpid()}"
    try:
        _recover_all(path, path.parent, prefix, log)
        old = {}
        if path.exists() or path.is_symlink():
            if path.is_symlink() or not path.is_dir():
                raise OutputDirError(
                    f"{path} is a file, not a directory: choose a new output directory"
                )
            old = _owned_files(path, owner)
            _refuse_foreign(path, owner, old)
        try:
            if stage.exists():
                shutil.rmtree(stage)
            stage.mkdir()
        except OSError as e:
            raise OutputDirError(
                f"{path}: cannot write there ({e.strerror or e}); choose a writable directory"
            ) from None
        with write_errors(path):
            yield stage
            names = _finish_stage(stage, owner)
        if not path.exists():
            os.chmod(stage, 0o777 & ~_umask())
            os.replace(stage, path)
        else:
            gone = _plan(path, owner, old, names, inputs)
            _swap(
                path,
                stage,
                path.parent / f"{prefix}.old-{os.getpid()}",
                [r for r in old if r in set(names)] + gone,
                log,
            )
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        release(lock)


def check_entries(out_dir: os.PathLike, owner: str, rels, inputs=None) -> None:
    """Before any work: the :class:`OutputDirError` that :func:`staged_entries` would raise at
    its end if the run wrote the files ``rels`` (relative names) into ``out_dir`` (a file there
    this command did not write, an input it would overwrite); nothing is written."""
    out = Path(os.path.abspath(out_dir))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputDirError(f"{out} is a file, not a directory: choose a new output directory")
    if out.is_dir():
        _plan(out, owner, _owned_files(out, owner), list(rels), inputs)


def _refuse_foreign(path: Path, owner: str, old: dict) -> None:
    if not old and not (path / MARKER).exists() and any(path.iterdir()):
        raise OutputDirError(
            f"{path} already holds files this command did not write; {owner} writes only into a new (or "
            "empty) directory or into its own earlier output, and never deletes anything else. Give a new "
            "output directory"
        )


def check_dir(path: os.PathLike, owner: str) -> None:
    """Before any work: the :class:`OutputDirError` :func:`atomic_dir` would raise for ``path``
    before writing (a file there, another command's output, files ``owner`` did not write), so a
    command writing several directories refuses before the first; nothing is written."""
    out = Path(os.path.abspath(path))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputDirError(f"{out} is a file, not a directory: choose a new output directory")
    if out.is_dir():
        _refuse_foreign(out, owner, _owned_files(out, owner))


@contextlib.contextmanager
def staged_entries(out_dir: os.PathLike, owner: str, names, log=None, inputs=None):
    """Write a set of outputs (files, and files inside directories, under the top-level
    ``names``) into a shared directory as one unit.

    ``out_dir`` may hold other files, inside those directories too (say a synonym table built
    into ``data-bin/``): they are never touched. Only the files an earlier run of ``owner``
    recorded in its marker (checked against the disk, :func:`_owned_files`) are replaced or
    removed, and not even those when they are ``inputs`` of this run (``{flag: path}``) that it
    does not write again; a new file landing on a file it did not write, or on an input, is
    :class:`OutputDirError`. The ``with`` block writes the new files into the yielded staging
    directory (inside ``out_dir``); they are then swapped in file by file (:func:`_swap`). On
    an error nothing of ``out_dir`` changes; after a kill the next run restores the old set,
    whole. Call it under :func:`output_lock`."""
    log = log or logging.getLogger(__name__).warning
    out = Path(os.path.abspath(out_dir))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputDirError(f"{out} is a file, not a directory: choose a new output directory")
    prefix = "." + owner.split()[0].replace("/", "_")
    created = not out.exists()
    stage = out / f"{prefix}.new-{os.getpid()}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        _recover_all(out, out, prefix, log)
        old = _owned_files(out, owner)
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir()
    except OSError as e:
        raise OutputDirError(
            f"{out}: cannot write there ({e.strerror or e}); choose a writable directory"
        ) from None
    try:
        with write_errors(out):
            yield stage
            unexpected = sorted(p.name for p in stage.iterdir() if p.name not in names)
            if unexpected:
                raise ValueError(
                    f"{owner} staged {unexpected}, not among its outputs {list(names)}"
                )
            new = _finish_stage(stage, owner)
        gone = _plan(out, owner, old, new, inputs)
        _swap(
            out,
            stage,
            out / f"{prefix}.old-{os.getpid()}",
            [r for r in old if r in set(new)] + gone,
            log,
        )
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
