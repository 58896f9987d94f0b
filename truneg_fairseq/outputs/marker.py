"""Output ownership: the marker file (``.truneg-output.json``) a command writes into its output
directory, listing the files it wrote (names, sizes, sha256 of small ones), and the check that
an existing directory is this command's earlier output before anything there is replaced."""

import hashlib
import json
import os
from pathlib import Path

from .output_errors import OutputDirError

MARKER = ".truneg-output.json"
HASHED_UP_TO = 1 << 20  # files up to 1 MiB are recorded with their sha256, larger ones by size
MAX_MARKER_BYTES = 64 << 20  # a marker lists file names and sizes: anything larger is not one

_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


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
        or "\0" in rel
        or rel == MARKER
    )


def _marker_shape_error(data) -> str:
    """Why ``data`` is not a marker this module writes ('' when it is one)."""
    if not isinstance(data, dict):
        return f"JSON {_JSON_TYPES.get(type(data), type(data).__name__)}, not an object"
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


def read_marker(marker: Path, what: str, advice: str) -> dict:
    """The marker ``marker`` of the shape :func:`_marker_shape_error` accepts; any other file
    there (not JSON, not an object, nested past the parser's depth, huge) is one
    :class:`OutputDirError` that says ``what`` it is the marker of and ``advice``."""
    try:
        if marker.is_symlink() or not marker.is_file():
            raise ValueError("not a plain file")
        if marker.stat().st_size > MAX_MARKER_BYTES:
            raise ValueError(f"{marker.stat().st_size} bytes, far more than a marker holds")
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else e
        raise OutputDirError(
            f"{what}: its {MARKER} is not readable JSON ({why}); {advice}"
        ) from None
    why = _marker_shape_error(data)
    if why:
        raise OutputDirError(
            f"{what}: its {MARKER} is not a marker of this project ({why}); {advice}"
        )
    return data


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
    data = read_marker(marker, str(out), advice)
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
