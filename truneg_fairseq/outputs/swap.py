"""Replacing a command's files in an output directory by a new set, file by file: what goes,
what stays (the user's files, the run's inputs), and the recovery of a swap a kill cut short
(the old set back, whole)."""

import json
import os
import shutil
from pathlib import Path

from .atomic import _umask, atomic_open
from .inputs import same_file
from .marker import MARKER, _describe, _files_under, read_marker
from .output_errors import OutputDirError


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _input_paths(inputs) -> list:
    """(flag, absolute path) of each input of the run (symbolic links followed)."""
    return [(flag, Path(os.path.realpath(p))) for flag, p in (inputs or {}).items() if p]


def _plan(out: Path, owner: str, old: dict, new_names, inputs) -> list:
    """Which earlier outputs go (those the new run does not write again, unless they are inputs
    of this run: those stay and are no longer recorded as outputs). A new file may not land on
    a file this command did not write, nor on an input of the run: each is one error."""
    real_out = Path(os.path.realpath(out))
    ins = _input_paths(inputs)
    for rel in new_names:
        target = real_out / rel
        for flag, p in ins:
            if _inside(target, p) or same_file(target, p):  # a hard link to the input too
                raise OutputDirError(
                    f"{flag} {p} would be overwritten by this run's {target}: copy it out of {out} and give "
                    "the copy, or choose another output directory"
                )
        if rel in old:
            continue
        path = out
        for part in rel.split("/"):
            path = path / part
            if (
                path.is_symlink()
                or (path.exists() and not path.is_dir())
                or (path == out / rel and path.exists())
            ):
                raise OutputDirError(
                    f"{path} was not written by {owner}, and this run would write {out / rel}; {owner} never "
                    f"replaces what it did not write. Move {path} away, or choose another output directory"
                )
    return [
        rel
        for rel in old
        if rel not in new_names and not any(_inside(real_out / rel, p) for _, p in ins)
    ]


def _move(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)


def _prune_empty_dirs(out: Path, rels) -> None:
    """Remove the directories that only held outputs now gone (never ``out`` itself, never a
    directory that still holds anything)."""
    dirs = {p for rel in rels for p in (out / rel).parents if _inside(p, out) and p != out}
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass


_ASIDE_DONE = ".all-set-aside"


def _swap(out: Path, stage: Path, aside: Path, old, log) -> None:
    """Replace this command's files in ``out`` by the staged ones, file by file, leaving every
    other file where it is.

    ``stage`` holds the new files and, last written, their marker. The old files (``old``: the earlier
    outputs written again, and those that go) and the old marker are renamed into ``aside``
    (then ``_ASIDE_DONE`` is made there), the new files renamed in, and the new marker renamed in
    last: that rename is the moment the new set counts as written. A crash before it leaves an
    ``aside`` and a ``stage`` with its marker, and :func:`_recover_swap` moves the new files out
    and the old ones back (the old set whole, with its marker); a crash after it leaves only
    leftovers to remove. Either way the user's files were never moved."""
    new_marker = json.loads((stage / MARKER).read_text(encoding="utf-8"))
    new_names = list(new_marker["files"])
    aside.mkdir()
    try:
        for rel in old:
            if (out / rel).exists() or (out / rel).is_symlink():
                _move(out / rel, aside / rel)
        if (out / MARKER).exists():
            _move(out / MARKER, aside / MARKER)
        (aside / _ASIDE_DONE).touch()
        for rel in new_names:
            _move(stage / rel, out / rel)
        os.replace(stage / MARKER, out / MARKER)
    except BaseException:
        _recover_swap(out, stage, aside, log)  # the old set back, whole
        raise
    shutil.rmtree(aside, ignore_errors=True)
    shutil.rmtree(stage, ignore_errors=True)
    _prune_empty_dirs(out, [rel for rel in old if rel not in new_marker["files"]])


def _recover_swap(out: Path, stage: Path, aside: Path, log) -> None:
    """Put right what a swap (:func:`_swap`) killed part way left: see there."""
    staged = stage / MARKER
    if aside.is_dir() and staged.is_file():
        log(
            f"restoring the previous outputs of {out} from {aside}: a run was killed while replacing them"
        )
        new_names = read_marker(
            staged,
            f"{stage} (the new outputs of a run killed while it replaced those of {out})",
            f"nothing was moved. Compare {stage} and {aside} with {out}, keep the files you want "
            f"in {out}, then remove both",
        )["files"]
        if (aside / _ASIDE_DONE).exists():  # every old file is aside: the new ones moved in go back
            for rel in new_names:
                if not (stage / rel).exists() and (
                    (out / rel).exists() or (out / rel).is_symlink()
                ):
                    _move(out / rel, stage / rel)
        for rel in _files_under(aside) + ([MARKER] if (aside / MARKER).exists() else []):
            if rel != _ASIDE_DONE:
                _move(aside / rel, out / rel)
        _prune_empty_dirs(out, new_names)
    elif aside.is_dir():
        log(f"removing {aside}: the previous outputs, already replaced")
    if stage.exists():
        log(f"removing {stage}: the unfinished output of a run that was killed")
    shutil.rmtree(aside, ignore_errors=True)
    shutil.rmtree(stage, ignore_errors=True)


def _recover_all(out: Path, stage_dir: Path, prefix: str, log) -> None:
    """Every staging (``PREFIX.new-PID``) and set-aside (``PREFIX.old-PID``) directory of killed
    runs in ``stage_dir``, put right pair by pair."""
    pids = {
        p.name[len(prefix) + 5 :]
        for kind in ("new", "old")
        for p in stage_dir.glob(f"{prefix}.{kind}-*")
    }
    for pid in sorted(pids):
        _recover_swap(
            out, stage_dir / f"{prefix}.new-{pid}", stage_dir / f"{prefix}.old-{pid}", log
        )
    if out.is_dir():
        for tmp in out.glob(f".{MARKER}.*.tmp"):  # a marker being written when the run was killed
            tmp.unlink(missing_ok=True)


def _finish_stage(stage: Path, owner: str) -> list:
    """Give the staged files the permissions ``mkdir`` and ``open`` would (mkdtemp makes
    directories private, some writers -- safetensors -- their files 0600) and write their
    marker into ``stage``; returns the staged names."""
    mask = _umask()
    for root, dirs, files in os.walk(stage):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~mask)
    names = _files_under(stage)
    with atomic_open(stage / MARKER, "w") as f:
        json.dump({"command": owner, "files": _describe(stage, names)}, f, indent=1)
    return names
