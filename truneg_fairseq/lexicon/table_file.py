"""The synonym table's file (``.npz``): written atomically, read without pickles, and every
array and meta field checked for its type and range before the table is used, each problem one
:class:`~truneg_fairseq.errors.SynonymTableError` that names the file and the fix."""

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from truneg_fairseq.errors import SynonymTableError
from truneg_fairseq.outputs import atomic_open, reading, write_errors

FORMAT_VERSION = 1


def save_arrays(path: os.PathLike, meta: dict, arrays: dict) -> None:
    """Write ``arrays`` and ``meta`` (as JSON) to ``path`` atomically; a full disk, a quota, a
    file-size limit or a read-only directory is one error naming ``path`` (no file is left)."""
    with write_errors(path, SynonymTableError, "no table was written"):
        with atomic_open(path, "wb") as f:
            np.savez_compressed(f, meta=np.asarray(json.dumps(meta, sort_keys=True)), **arrays)


def _int_array(path, name, a, ndim) -> np.ndarray:
    if a.ndim != ndim or not np.issubdtype(a.dtype, np.integer):
        raise SynonymTableError(
            f"{path}: its {name} array is {a.dtype} of shape {a.shape}, expected integers of "
            f"{ndim} dimension(s); rebuild the table with scripts/build_synonym_table.py"
        )
    return a.astype(np.int64)


def check_meta(path, meta) -> dict:
    """``meta`` if it is the record this module writes: an object with ``format_version``,
    ``num_symbols`` (a whole number) and ``fingerprint`` (a sha256 string)."""
    rebuild = "rebuild the table with scripts/build_synonym_table.py"
    if not isinstance(meta, dict):
        raise SynonymTableError(
            f"{path}: its meta record is a JSON {type(meta).__name__}, not an object; {rebuild}"
        )
    if meta.get("format_version") != FORMAT_VERSION:
        raise SynonymTableError(
            f"{path}: table format {meta.get('format_version')!r} (expected {FORMAT_VERSION}); {rebuild}"
        )
    n = meta.get("num_symbols")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SynonymTableError(
            f"{path}: its meta num_symbols is {n!r}, not a whole number of dictionary entries; {rebuild}"
        )
    fp = meta.get("fingerprint")
    if not (isinstance(fp, str) and len(fp) == 64 and all(c in "0123456789abcdef" for c in fp)):
        raise SynonymTableError(
            f"{path}: its meta fingerprint is {fp!r}, not the sha256 of a dictionary; {rebuild}"
        )
    return meta


# bounds read from the arrays' headers before any array is decompressed
MAX_META_BYTES = 1 << 22  # the JSON meta record
MAX_PAIRS_PER_ENTRY = 4096  # synonyms of one entry (WordNet's widest word has a few hundred)
MAX_RATIO = 256  # uncompressed / compressed bytes of a member: int64 ids compress far less


def _headers(path: Path) -> dict:
    """{array name: (shape, dtype, uncompressed bytes)} of the ``.npy`` members of ``path``, read
    from each member's header (a few hundred bytes): nothing is decompressed beyond them. A
    member that would decompress to far more than it holds (a zip of zeros) is refused."""
    from numpy.lib import format as npy

    foreign = f"{path} is not a synonym table written by build_synonym_table.py"
    out = {}
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[: -len(".npy")]
            if info.file_size > MAX_RATIO * info.compress_size + (1 << 20):
                raise SynonymTableError(
                    f"{path}: its {name} array would decompress to {info.file_size} bytes from "
                    f"{info.compress_size}: not a table this package writes; rebuild the table "
                    "with scripts/build_synonym_table.py"
                )
            try:
                with z.open(info) as f:
                    version = npy.read_magic(f)
                    read = (
                        npy.read_array_header_1_0
                        if version == (1, 0)
                        else npy.read_array_header_2_0
                    )
                    shape, _, dtype = read(f)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
                raise SynonymTableError(f"{foreign} ({e})") from None
            if dtype.hasobject:  # numpy's advice (allow_pickle) must not be taken
                raise SynonymTableError(
                    f"{foreign} (it holds pickled objects); rebuild it with that script"
                )
            out[name] = (shape, dtype, info.file_size)
    return out


def check_sizes(path: Path, headers: dict, n: int) -> None:
    """The arrays' shapes (from :func:`_headers`) within what a table of a dictionary of ``n``
    entries can hold: id lists at most ``n`` long, at most ``n * min(n - 1,
    MAX_PAIRS_PER_ENTRY)`` pairs, integers of at most 8 bytes."""
    rebuild = "rebuild the table with scripts/build_synonym_table.py"
    limits = {
        "pairs": n * min(max(n - 1, 0), MAX_PAIRS_PER_ENTRY),
        "continuation_ids": n,
        "content_ids": n,
    }
    for name, limit in limits.items():
        if name not in headers:
            continue
        shape, dtype, _ = headers[name]
        if dtype.kind not in "iu" or dtype.itemsize > 8:
            raise SynonymTableError(
                f"{path}: its {name} array is {dtype} of shape {shape}, expected integers; {rebuild}"
            )
        rows = shape[0] if shape else 0
        if rows > limit:
            raise SynonymTableError(
                f"{path}: its {name} array has {rows} rows, more than a table of a {n}-entry "
                f"dictionary can hold ({limit}); {rebuild}"
            )


def _meta_json(path, text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise SynonymTableError(
            f"{path}: its meta record is not JSON; rebuild the table with "
            "scripts/build_synonym_table.py"
        ) from None


def load_arrays(path: os.PathLike, vocab_size: int = None):
    """(pairs, continuation_ids, content_ids or None, meta) of the table file ``path``, checked;
    ``vocab_size``: the size of the dictionary it is for, which bounds every array before it is
    decompressed."""
    path = Path(path)
    if not path.is_file():
        raise SynonymTableError(
            f"synonym table {path} not found: build it with `python scripts/build_synonym_table.py "
            "--dict DATA/dict.txt ... --output FILE` and pass it as --synonym-table"
        )
    reading(path, "synonym table")  # an output of the command may not be it
    foreign = f"{path} is not a synonym table written by build_synonym_table.py"
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":  # not an .npz (zip) archive: numpy would guess a pickle
            raise SynonymTableError(f"{foreign} (not an .npz archive); rebuild it with that script")
    try:
        headers = _headers(path)
        meta_head = headers.get("meta")
        if meta_head is None or meta_head[1].kind != "U" or meta_head[2] > MAX_META_BYTES:
            raise SynonymTableError(f"{foreign} (no meta record of the size it writes)")
        with np.load(path, allow_pickle=False) as z:
            n = check_meta(path, _meta_json(path, str(z["meta"])))["num_symbols"]
            if vocab_size is not None and n > vocab_size:
                raise SynonymTableError(
                    f"{path} is a table of a {n}-entry dictionary, more than the {vocab_size} "
                    "entries of this one; rebuild it from this dict.txt with "
                    "scripts/build_synonym_table.py"
                )
            check_sizes(path, headers, n)
            pairs = z["pairs"]
            cont = z["continuation_ids"]
            content = z["content_ids"] if "content_ids" in z.files else None
            meta_text = str(z["meta"])
    except SynonymTableError:
        raise
    except ValueError as e:  # an array of objects: numpy's advice (allow_pickle) must not be taken
        raise SynonymTableError(
            f"{foreign} (it holds pickled objects); rebuild it with that script"
        ) from e
    except Exception as e:  # corrupt or foreign archive
        raise SynonymTableError(f"{foreign} ({e})") from e
    meta = check_meta(path, _meta_json(path, meta_text))
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise SynonymTableError(f"{path}: pairs array has shape {pairs.shape}, expected P x 2")
    pairs = _int_array(path, "pairs", pairs, 2)
    cont = _int_array(path, "continuation_ids", cont, 1)
    content = None if content is None else _int_array(path, "content_ids", content, 1)
    n = meta["num_symbols"]
    for name, a in (("pairs", pairs), ("continuation_ids", cont), ("content_ids", content)):
        if a is not None and a.size and (a.min() < 0 or a.max() >= n):
            raise SynonymTableError(
                f"{path}: its {name} hold ids outside the dictionary's {n} entries; rebuild the "
                "table with scripts/build_synonym_table.py"
            )
    return pairs, cont, content, meta
