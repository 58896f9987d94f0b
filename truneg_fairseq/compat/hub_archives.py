"""Archives given to fairseq's hub (``safe_hub_archives``).

``RobertaModel.from_pretrained("model.tar.gz")`` (every model class the plugin registers inherits
it) reaches ``fairseq.file_utils.load_archive_file``, which extracts the archive with
``tarfile.extractall`` and no filter, so a member named ``../../x.py`` or ``/abs/x.py`` is
written outside the extraction directory (over a file of an installed package, which then runs
on import), and then deletes the user's archive and puts the extracted directory in its place.

With the plugin imported, ``load_archive_file`` checks every member first: one whose name is
absolute or climbs out with ``..``, a link, or anything that is not a plain file or directory
refuses the whole archive (:class:`UnsafeArchiveError` naming the archive and the member) before
anything is written. So does an archive that would expand to too much (:func:`check_size`: more
than ``TRUNEG_HUB_ARCHIVE_MAX_MEMBERS`` members, 10,000 by default; member sizes adding up to more
than ``TRUNEG_HUB_ARCHIVE_MAX_BYTES``, 64 GiB by default, or, past 64 MiB, to more than
``TRUNEG_HUB_ARCHIVE_MAX_RATIO`` times the archive's own size, 100 by default), judged from the
sizes the headers declare before anything is written, and so do members that contradict each
other (:func:`check_layout`: a file named twice, ``model.pt`` then ``model.pt/x``). A safe
archive is extracted with tarfile's ``data`` filter into a new temporary directory, and the
archive stays where it was; loading the same, unchanged archive again in the process uses that
copy, and every copy is removed when the process exits. A failed extraction (a truncated or
damaged archive, a full disk, an interrupt) removes that directory and all it wrote, and is one
:class:`ArchiveError` naming the archive (an interrupt stays an interrupt). A directory is used
as it is.

fairseq's own hub without ``import truneg_fairseq`` first (``fairseq.hub_utils.from_pretrained``,
``torch.hub.load("pytorch/fairseq", ...)``) keeps fairseq's extraction (docs/demo-and-study.md).

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
import zlib

from truneg_fairseq.errors import (  # noqa: F401  (defined in the one place of the errors)
    ArchiveError,
    UnsafeArchiveError,
)

from .wrapping import wrap_once

logger = logging.getLogger(__name__)


def check_members(archive: tarfile.TarFile, path: str) -> None:
    """Refuse ``archive`` (read from ``path``) unless every member is a plain file or directory
    whose name stays inside the extraction directory, and the members agree with each other
    (:func:`check_layout`)."""
    for m in archive.getmembers():
        name = m.name.replace("\\", "/")
        parts = posixpath.normpath(name).split("/")
        why = None
        if name.startswith("/") or os.path.isabs(m.name) or (len(name) > 1 and name[1] == ":"):
            why = "an absolute path"
        elif ".." in name.split("/") or parts[0] == "..":
            why = "a path climbing out with '..'"
        elif not (m.isfile() or m.isdir()):
            why = "a link or special file"
        if why:
            raise UnsafeArchiveError(
                f"{path}: member {m.name[:120]!r} is {why}, which would be written outside the "
                "directory it is extracted to; nothing was extracted. Extract a trusted archive "
                "yourself and give the directory (truneg_fairseq.models.hub.from_pretrained(DIR))"
            )


def check_layout(members: list, path: str) -> None:
    """Refuse members that contradict each other, before anything is written: a file named
    twice (which one is the model?), or a member under a name the archive holds as a file
    (``model.pt`` then ``model.pt/x``), which no directory can hold."""
    files, dirs, parents = {}, set(), {}
    for m in members:
        name = posixpath.normpath(m.name.replace("\\", "/")).lstrip("/")
        if name in (".", ""):
            continue
        if m.isdir():
            dirs.add(name)
        elif name in files:
            raise ArchiveError(
                f"{path}: member {m.name[:120]!r} is in the archive twice, so which one is meant "
                "is not known; nothing was extracted. Use an archive that holds each file once, "
                "or extract it yourself and give the directory"
            )
        else:
            files[name] = m.name
        parts = name.split("/")
        for i in range(1, len(parts)):
            parents.setdefault("/".join(parts[:i]), m.name)
    for name, member in files.items():
        under = parents.get(name, member if name in dirs else None)
        if under is not None:
            raise ArchiveError(
                f"{path}: member {under[:120]!r} needs {member[:120]!r} to be a directory, but "
                "the archive holds a file of that name too; nothing was extracted. The archive "
                "is damaged or not a model archive: use another, or extract it yourself and "
                "give the directory"
            )


# the bounds on what an archive may expand to (environment variables, docs/demo-and-study.md)
MAX_BYTES_ENV, MAX_RATIO_ENV, MAX_MEMBERS_ENV = (
    "TRUNEG_HUB_ARCHIVE_MAX_BYTES",
    "TRUNEG_HUB_ARCHIVE_MAX_RATIO",
    "TRUNEG_HUB_ARCHIVE_MAX_MEMBERS",
)
DEFAULT_MAX_BYTES = 64 << 30  # larger than fairseq's largest published model archive
DEFAULT_MAX_RATIO = 100  # weights barely compress: a real archive expands 1-3 times
DEFAULT_MAX_MEMBERS = 10_000  # fairseq's archives hold a handful of files
RATIO_FLOOR = (
    64 << 20
)  # below this total the ratio is not checked (a small dict.txt compresses well)


def _limit(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value <= 0:
        raise UnsafeArchiveError(
            f"{name}={text!r} is not a positive whole number; set it to one (or unset it: "
            f"{default} by default)"
        )
    return value


def check_size(archive: tarfile.TarFile, path: str) -> list:
    """The members of ``archive`` (read from ``path``), read one header at a time, with
    :class:`UnsafeArchiveError` as soon as they are more than ``TRUNEG_HUB_ARCHIVE_MAX_MEMBERS``
    or their sizes add up to more than ``TRUNEG_HUB_ARCHIVE_MAX_BYTES``, or (above 64 MiB) to
    more than ``TRUNEG_HUB_ARCHIVE_MAX_RATIO`` times the archive's own size: a member's size is
    what its header declares (a sparse member's whole size), so nothing is written before."""
    max_bytes = _limit(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)
    max_ratio = _limit(MAX_RATIO_ENV, DEFAULT_MAX_RATIO)
    max_members = _limit(MAX_MEMBERS_ENV, DEFAULT_MAX_MEMBERS)
    packed = max(os.path.getsize(path), 1)
    allowed = min(max_bytes, max(RATIO_FLOOR, max_ratio * packed))
    members, total = [], 0
    while True:
        member = archive.next()
        if member is None:
            return members
        members.append(member)
        if len(members) > max_members:
            raise UnsafeArchiveError(
                f"{path} holds more than {max_members} members; nothing was extracted. A model "
                f"archive holds a few files: extract one you trust yourself, or raise "
                f"{MAX_MEMBERS_ENV}"
            )
        total += max(member.size, 0)
        if total > allowed:
            why = (
                f"more than {max_bytes} bytes ({MAX_BYTES_ENV})"
                if allowed == max_bytes
                else f"more than {max_ratio} times its own {packed} bytes ({MAX_RATIO_ENV})"
            )
            raise UnsafeArchiveError(
                f"{path}: its members declare {total} bytes or more (member {member.name[:120]!r}: "
                f"{member.size} bytes), {why}; nothing was extracted. Extract an archive you "
                "trust yourself and give the directory, or raise the limit"
            )


# archives extracted by this process: {(real path, inode, size, mtime): (directory, model
# directory)}; a load of the same archive again uses that copy, and every copy is removed when
# the process exits, so loads leave nothing behind in the temporary directory
_EXTRACTED: dict = {}
# what a damaged or truncated archive raises while it is read (gzip, bz2 and xz streams too)
_DAMAGED = (tarfile.TarError, EOFError, zlib.error)
try:
    import lzma

    _DAMAGED += (lzma.LZMAError,)
except ImportError:  # pragma: no cover - an interpreter built without lzma
    pass


def _identity(path: str):
    st = os.stat(path)
    return os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns


def _remove_extracted() -> None:
    for target, _ in list(_EXTRACTED.values()):
        shutil.rmtree(target, ignore_errors=True)
    _EXTRACTED.clear()


def extract(path: str) -> str:
    """The directory of archive ``path`` after a checked extraction (see the module docstring):
    the copy this process extracted already when the archive is unchanged, else a new one.
    Whatever a failed extraction wrote is removed with its temporary directory, and the failure
    is one :class:`ArchiveError` naming the archive."""
    key = _identity(path)
    known = _EXTRACTED.get(key)
    if known is not None and os.path.isdir(known[1]):
        return known[1]
    target = tempfile.mkdtemp(prefix="truneg-hub-")
    try:
        with tarfile.open(path, "r:*") as archive:
            members = check_size(archive, path)
            check_members(archive, path)
            check_layout(members, path)
            names = [m.name for m in members]
            archive.extractall(target, members=members, filter="data")
    except BaseException as e:
        shutil.rmtree(target, ignore_errors=True)
        if isinstance(e, ArchiveError) or not isinstance(e, Exception):
            raise
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise ArchiveError(
                f"{path}: extracting it into {tempfile.gettempdir()} failed ({first}); nothing "
                "of it was left there. Free space there (or set TMPDIR to a larger disk), or "
                "extract it yourself and give the directory"
            ) from None
        if isinstance(e, (*_DAMAGED, OSError)):
            raise ArchiveError(
                f"{path} is not a readable archive: truncated or damaged ({first}); nothing of it "
                "was left extracted. Download or copy it again, or give the model's directory"
            ) from None
        raise
    top = os.path.commonprefix(names) if names else ""
    top = top if top and os.path.isdir(os.path.join(target, top)) else ""
    out = os.path.join(target, top)
    if not _EXTRACTED:  # the first copy (re-registering later is harmless: it clears them all)
        atexit.unregister(_remove_extracted)
        atexit.register(_remove_extracted)
    _EXTRACTED[key] = (target, out)
    logger.info(f"extracted {path} to {out} (the archive is kept; the copy goes at exit)")
    return out


def safe_hub_archives() -> None:
    """Check and extract archives as the module docstring says, for every caller of
    ``fairseq.file_utils.load_archive_file`` (``hub_utils`` looks it up at each call)."""
    from fairseq import file_utils

    def checked_extraction(original):
        def load_archive_file(archive_file):
            try:
                resolved = file_utils.cached_path(archive_file, cache_dir=None)
            except EnvironmentError:
                return original(archive_file)  # fairseq's message for a name it cannot find
            if os.path.isdir(resolved):
                return resolved
            return extract(resolved)

        return load_archive_file

    wrap_once(file_utils, "load_archive_file", checked_extraction, marker="truneg_safe")
