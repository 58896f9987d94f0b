"""Archives given to fairseq's hub (``safe_hub_archives``).

``RobertaModel.from_pretrained("model.tar.gz")`` (every model class the plugin registers inherits
it) reaches ``fairseq.file_utils.load_archive_file``, which extracts the archive with
``tarfile.extractall`` and no filter, so a member named ``../../x.py`` or ``/abs/x.py`` is
written outside the extraction directory (over a file of an installed package, which then runs
on import), and then deletes the user's archive and puts the extracted directory in its place.

With the plugin imported, ``load_archive_file`` checks every member first: one whose name is
absolute or climbs out with ``..``, a link, or anything that is not a plain file or directory
refuses the whole archive (:class:`UnsafeArchiveError` naming the archive and the member) before
anything is written. A safe archive is extracted with tarfile's ``data`` filter into a new
temporary directory, and the archive stays where it was. A directory is used as it is.

fairseq's own hub without ``import truneg_fairseq`` first (``fairseq.hub_utils.from_pretrained``,
``torch.hub.load("pytorch/fairseq", ...)``) keeps fairseq's extraction (docs/demo-and-study.md).
"""

from __future__ import annotations

import logging
import os
import posixpath
import tarfile
import tempfile

logger = logging.getLogger(__name__)


class UnsafeArchiveError(ValueError):
    """An archive with a member that would be written outside its extraction directory."""


def check_members(archive: tarfile.TarFile, path: str) -> None:
    """Refuse ``archive`` (read from ``path``) unless every member is a plain file or directory
    whose name stays inside the extraction directory."""
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


def extract(path: str) -> str:
    """The directory of archive ``path`` after a checked extraction (see the module docstring)."""
    mode = "r:*"
    target = tempfile.mkdtemp(prefix="truneg-hub-")
    try:
        with tarfile.open(path, mode) as archive:
            check_members(archive, path)
            names = archive.getnames()
            archive.extractall(target, filter="data")
    except (tarfile.TarError, UnsafeArchiveError):
        import shutil

        shutil.rmtree(target, ignore_errors=True)
        raise
    top = os.path.commonprefix(names) if names else ""
    top = top if top and os.path.isdir(os.path.join(target, top)) else ""
    out = os.path.join(target, top)
    logger.info(f"extracted {path} to {out} (the archive is kept)")
    return out


def safe_hub_archives() -> None:
    """Check and extract archives as the module docstring says, for every caller of
    ``fairseq.file_utils.load_archive_file`` (``hub_utils`` looks it up at each call)."""
    from fairseq import file_utils

    original = file_utils.load_archive_file
    if getattr(original, "truneg_safe", False):  # installed already
        return

    def load_archive_file(archive_file):
        try:
            resolved = file_utils.cached_path(archive_file, cache_dir=None)
        except EnvironmentError:
            return original(archive_file)  # fairseq's message for a name it cannot find
        if os.path.isdir(resolved):
            return resolved
        return extract(resolved)

    load_archive_file.truneg_safe = True
    file_utils.load_archive_file = load_archive_file
