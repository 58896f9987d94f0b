"""Lines of input text files, whatever their line endings: ``\\n`` (Unix), ``\\r\\n`` (Windows)
and a lone ``\\r`` (classic Mac OS, some spreadsheet exports). Python's binary iteration splits
only at ``\\n``, so a file whose lines end in ``\\r`` alone would be read as one huge line (one
training "sentence", a GLUE file of one malformed row). A file is read as CR-only when its first
block holds a ``\\r`` and no ``\\n``; otherwise only ``\\n`` ends a line and a ``\\r`` before it
is dropped (a ``\\r`` inside a line of such a file is kept: it is text, not a line break).

Reading takes time in proportion to the file, however long its lines: the blocks of a line are
kept apart and joined once, when its end is found. A line of more than :data:`MAX_LINE_BYTES`
bytes (32 MiB; the environment variable ``TRUNEG_MAX_LINE_BYTES`` sets another limit) is more
than any command of the package uses as one sentence, document or row: it is one
:class:`~truneg_fairseq.errors.LineTooLongError` naming the file and the line, raised as soon as
the line passes the limit (nothing more of it is read)."""

import os
from typing import BinaryIO, Iterator, Optional

from truneg_fairseq.errors import LineTooLongError
from truneg_fairseq.outputs import reading

BLOCK = 1 << 20
MAX_LINE_BYTES = 32 << 20
LIMIT_VARIABLE = "TRUNEG_MAX_LINE_BYTES"


def max_line_bytes() -> int:
    """The longest line read, in bytes: ``TRUNEG_MAX_LINE_BYTES`` when set, else
    :data:`MAX_LINE_BYTES`."""
    value = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not value:
        return MAX_LINE_BYTES
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise LineTooLongError(
            f"{LIMIT_VARIABLE}={value!r}: give the longest line to read, in bytes (a whole number "
            f"> 0; default {MAX_LINE_BYTES})"
        )
    return limit


def _too_long(name, number: int, limit: int) -> LineTooLongError:
    where = f"{name}, line {number}" if name is not None else f"line {number}"
    return LineTooLongError(
        f"{where} is longer than {limit:,} bytes, more than any command here uses as one "
        "sentence, document or row (is the file one line, or its line endings lost?): split it "
        f"into lines, or set {LIMIT_VARIABLE} to a larger limit"
    )


def binary_lines(
    f: BinaryIO, limit: Optional[int] = None, name: Optional[os.PathLike] = None
) -> Iterator[bytes]:
    """The lines of the binary file object ``f`` (plain or decompressing), each with its line
    ending removed; see the module docstring for which endings count. A line longer than
    ``limit`` bytes (default :func:`max_line_bytes`) is a :class:`LineTooLongError` naming
    ``name`` and the line."""
    limit = max_line_bytes() if limit is None else limit
    head = f.read(BLOCK)
    cr_only = b"\r" in head and b"\n" not in head
    sep = b"\r" if cr_only else b"\n"
    pending, size, number = [], 0, 0  # the blocks of the line being read, their bytes
    block = head
    while block:
        parts = block.split(sep)
        if len(parts) > 1:
            pending.append(parts[0])
            parts[0] = b"".join(pending)
            for line in parts[:-1]:
                number += 1
                if len(line) > limit:
                    raise _too_long(name, number, limit)
                yield line if cr_only or not line.endswith(b"\r") else line[:-1]
            pending, size = [], 0
        if parts[-1]:
            pending.append(parts[-1])
            size += len(parts[-1])
            if size > limit:
                raise _too_long(name, number + 1, limit)
        block = f.read(BLOCK)
    if pending:
        line = b"".join(pending)
        yield line if cr_only or not line.endswith(b"\r") else line[:-1]


def read_lines(
    path: os.PathLike, encoding: str = "utf-8", limit: Optional[int] = None
) -> Iterator[str]:
    """The lines of the text file ``path`` (decoded with ``encoding``), line endings removed,
    CR-only files read as lines (:func:`binary_lines`, ``limit`` its longest line). A
    ``UnicodeDecodeError`` names the line through its ``lineno`` attribute (1-based) for the
    caller's message."""
    reading(path, "text file")  # an output of the command may not be it
    with open(path, "rb") as f:
        for i, raw in enumerate(binary_lines(f, limit, path), 1):
            try:
                yield raw.decode(encoding)
            except UnicodeDecodeError as e:
                e.lineno = i
                raise
