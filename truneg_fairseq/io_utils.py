"""Atomic file output: write to a temporary file beside the target, then rename over it."""

import contextlib
import errno
import hashlib
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
HASHED_UP_TO = 1 << 20  # files up to 1 MiB are recorded with their sha256, larger ones by size


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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files_under(root: Path):
    """Relative posix names of the plain files under ``root`` (its marker left out)."""
    names = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel != MARKER:
                names.append(rel)
    return sorted(names)


def _describe(root: Path, names) -> dict:
    """What the marker records of each written file: its size, and its sha256 when it is small
    (cheap to hash, and the files a user is likeliest to edit or copy in: dictionaries, configs)."""
    files = {}
    for rel in names:
        size = (root / rel).stat().st_size
        files[rel] = {
            "size": size,
            **({"sha256": _sha256(root / rel)} if size <= HASHED_UP_TO else {}),
        }
    return files


def _bad_name(rel) -> bool:
    parts = rel.split("/") if isinstance(rel, str) else None
    return (
        not parts
        or rel.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or rel == MARKER
    )


def _marker_shape_error(data) -> str:
    """Why ``data`` is not a marker this module writes ('' when it is one)."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if not isinstance(data.get("command"), str):
        return 'no "command" string'
    files = data.get("files")
    if not isinstance(files, dict):
        return 'no "files" object (the names and sizes of what was written)'
    for rel, entry in files.items():
        if _bad_name(rel):
            return f"the file name {rel!r} is not a relative name inside the directory"
        if not isinstance(entry, dict) or type(entry.get("size")) is not int or entry["size"] < 0:
            return f'the entry of {rel} has no "size"'
        digest = entry.get("sha256")
        if digest is not None and not (
            isinstance(digest, str)
            and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest)
        ):
            return f"the sha256 of {rel} is not a sha256"
    return ""


def _mismatch(out: Path, rel: str, entry: dict) -> str:
    """How the file ``rel`` under ``out`` differs from its marker entry ('' when it matches);
    a name reached through a symbolic link never matches (replacing it could write elsewhere)."""
    path = out
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            return f"{rel} goes through the symbolic link {path}"
    if not path.exists():
        return f"{rel} is missing"
    if not path.is_file():
        return f"{rel} is not a plain file"
    if path.stat().st_size != entry["size"]:
        return f"{rel} has {path.stat().st_size} bytes, not the {entry['size']} recorded"
    if "sha256" in entry and _sha256(path) != entry["sha256"]:
        return f"{rel} is not the file that was written (its sha256 differs)"
    return ""


def _owned_files(out: Path, owner: str) -> dict:
    """The files an earlier run of ``owner`` wrote in ``out`` ({} when ``out`` has no marker).

    The marker is trusted only when it is of the shape this module writes, names ``owner`` and
    every file it lists is on disk as recorded: a marker copied in with other files, forged,
    or left behind files changed since, would otherwise make this run replace or delete files
    it never wrote. Any doubt is one :class:`OutputDirError`, before anything is touched."""
    marker = out / MARKER
    if not marker.exists() and not marker.is_symlink():
        return {}
    advice = "nothing was deleted. Move that directory away, or choose another output directory"
    try:
        if marker.is_symlink() or not marker.is_file():
            raise ValueError("not a plain file")
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, OSError) as e:
        raise OutputDirError(f"{out}: its {MARKER} is not readable JSON ({e}); {advice}") from None
    why = _marker_shape_error(data)
    if why:
        raise OutputDirError(
            f"{out}: its {MARKER} is not a marker of this project ({why}); {advice}"
        )
    if data["command"] != owner:
        raise OutputDirError(
            f"{out} already holds the output of `{data['command']}`; {owner} writes only into a new (or empty) "
            "directory or into its own earlier output, and never deletes anything else. Give a new output directory"
        )
    for rel, entry in sorted(data["files"].items()):
        why = _mismatch(out, rel, entry)
        if why:
            raise OutputDirError(
                f"{out}: its {MARKER} says {owner} wrote {rel}, but {why}: the marker was copied or the files "
                f"changed since; {advice}"
            )
    return data["files"]


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
            if _inside(target, p):
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
        new_names = json.loads(staged.read_text(encoding="utf-8"))["files"]
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


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EFBIG)


@contextlib.contextmanager
def _write_errors(path: Path):
    """A write that fails for lack of space or permission inside the block becomes one
    :class:`OutputDirError` naming ``path``."""
    try:
        yield
    except OSError as e:
        if e.errno in WRITE_ERRNOS:
            raise OutputDirError(
                f"{path}: writing failed ({e.strerror}): free space or choose another "
                "directory; nothing was replaced"
            ) from None
        raise
    except Exception as e:  # torch.save and safetensors report a full disk in their own errors
        if _write_failure(e):
            raise OutputDirError(
                f"{path}: writing failed (disk full or a file-size limit): "
                "free space or choose another directory; nothing was replaced"
            ) from None
        raise


_WRITE_FAILURE_TEXTS = (
    "inline_container",
    "No space left",
    "File too large",
    "Disk quota",
    "os error 28",
    "os error 27",
    "os error 122",
)


def _write_failure(e: BaseException) -> bool:
    """A writer's own error (torch's zip writer, safetensors) that is a full disk underneath."""
    return any(t in str(e) for t in _WRITE_FAILURE_TEXTS)


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
    import logging

    log = log or logging.getLogger(__name__).warning
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = _lock(path, log)
    except OSError as e:
        raise OutputDirError(
            f"{path}: cannot write there ({e.strerror or e}); choose a writable directory"
        ) from None
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
            if not old and not (path / MARKER).exists() and any(path.iterdir()):
                raise OutputDirError(
                    f"{path} already holds files this command did not write; {owner} writes only into a new (or "
                    "empty) directory or into its own earlier output, and never deletes anything else. Give a new "
                    "output directory"
                )
        try:
            if stage.exists():
                shutil.rmtree(stage)
            stage.mkdir()
        except OSError as e:
            raise OutputDirError(
                f"{path}: cannot write there ({e.strerror or e}); choose a writable directory"
            ) from None
        with _write_errors(path):
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
        lock.unlink(missing_ok=True)


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
    import logging

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
        with _write_errors(out):
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
