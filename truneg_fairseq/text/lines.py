"""Lines of input text files, whatever their line endings: ``\\n`` (Unix), ``\\r\\n`` (Windows)
and a lone ``\\r`` (classic Mac OS, some spreadsheet exports). Python's binary iteration splits
only at ``\\n``, so a file whose lines end in ``\\r`` alone would be read as one huge line (one
training "sentence", a GLUE file of one malformed row). A file is read as CR-only when its first
block holds a ``\\r`` and no ``\\n``; otherwise only ``\\n`` ends a line and a ``\\r`` before it
is dropped (a ``\\r`` inside a line of such a file is kept: it is text, not a line break)."""

import os
from typing import BinaryIO, Iterator

BLOCK = 1 << 20


def binary_lines(f: BinaryIO) -> Iterator[bytes]:
    """The lines of the binary file object ``f`` (plain or decompressing), each with its line
    ending removed; see the module docstring for which endings count."""
    head = f.read(BLOCK)
    if b"\r" in head and b"\n" not in head:
        rest = b""
        block = head
        while block:
            parts = (rest + block).split(b"\r")
            rest = parts.pop()
            yield from parts
            block = f.read(BLOCK)
        if rest:
            yield rest
        return
    rest = b""
    block = head
    while block:
        parts = (rest + block).split(b"\n")
        rest = parts.pop()
        for line in parts:
            yield line[:-1] if line.endswith(b"\r") else line
        block = f.read(BLOCK)
    if rest:
        yield rest[:-1] if rest.endswith(b"\r") else rest


def read_lines(path: os.PathLike, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of the text file ``path`` (decoded with ``encoding``), line endings removed,
    CR-only files read as lines (:func:`binary_lines`). A ``UnicodeDecodeError`` names the
    line through its ``lineno`` attribute (1-based) for the caller's message."""
    with open(path, "rb") as f:
        for i, raw in enumerate(binary_lines(f), 1):
            try:
                yield raw.decode(encoding)
            except UnicodeDecodeError as e:
                e.lineno = i
                raise
