"""The train/valid split of a corpus in bounded memory: de-duplicated, shuffled and cut exactly
as ``random.Random(seed).shuffle`` on the list of distinct lines would cut it, without that list.

:class:`ExternalSplit` takes the lines one at a time (:meth:`~ExternalSplit.feed`) and keeps
none of them: each goes, with its number, to one of the temporary files (about ``part_bytes`` of
text each by the size hint, at most :func:`max_open_files`) chosen by a hash of its text, so
that every copy of a line lands in the same file. :meth:`~ExternalSplit.finish` then works one
file at a time:

1. de-duplicate: the distinct lines of one file are held in a set (about ``part_bytes`` of
   text); a file with more distinct text than ``part_bytes`` x :data:`GUARD` (a corpus of many
   more lines than the size hint said) is split again by another hash, and so on;
2. shuffle: the permutation of the ``U`` distinct lines is the one ``random.shuffle`` makes,
   drawn with the same calls of the same generator, on an array of ``U`` integers in a file
   mapped into memory (4 bytes a line; its pages are handed back to the kernel every few
   thousand swaps, so the resident part stays small however long the corpus), then inverted:
   the place of each distinct line;
3. order: the distinct lines, merged back into their first-seen order, go to files by their
   place in the shuffled order (ranges of places), and each range is written out in order: the
   first ``max(1, int(U * valid_fraction))`` places to ``valid.txt``, the rest to ``train.txt``.

Memory is that of one partition or range (about ``part_bytes`` of text, at most :data:`GUARD`
times that, plus Python's overhead per line) and a buffer per open file, whatever the number of
lines; disk is about twice the distinct text while it runs. The temporary files live in ``work_dir`` (the output's own file system, not
``/tmp``), removed when the split ends or fails.

The result is byte for byte what the in-memory split wrote:
``uniq = list(dict.fromkeys(lines)); random.Random(seed).shuffle(uniq)``, the first
``max(1, int(len(uniq) * valid_fraction))`` lines to valid, the rest to train.
"""

from __future__ import annotations

import heapq
import math
import mmap
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Tuple

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.outputs import atomic_open

PART_BYTES = 16 << 20  # text of one partition or range held in memory at once
GUARD = 8  # a partition or range of more than GUARD x part_bytes is cut again
SET_OVERHEAD = 80  # bytes a distinct line costs beyond its text (bytes object, set slot)
RELEASE_EVERY = 8192  # swaps (or inverse entries) between hand-backs of the mapped pages
CHUNK = 8192  # integers of a mapped array turned into Python objects at a time


def max_open_files() -> int:
    """Temporary files open at once: partitions and ranges are both open while lines move from
    one to the other, so each gets a quarter of the descriptor limit (at most 1024)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            soft = 4096
    except (ImportError, ValueError, OSError):  # not a Unix
        soft = 1024
    return max(16, min(1024, soft // 4))


# ---- records: "NUMBER<TAB>TEXT\n" -------------------------------------------------------------
# A line holding a newline or a backslash is stored escaped ("\\" -> "\\\\", "\n" -> "\\n"):
# a record is then still one line of the file, and since every stored form that holds a
# backslash is an escaped one, two lines are equal exactly when their stored forms are.


def _stored(data: bytes) -> bytes:
    if b"\\" in data or b"\n" in data:
        return data.replace(b"\\", b"\\\\").replace(b"\n", b"\\n")
    return data


def _original(body: bytes) -> bytes:
    """The line of a stored form that ends in its record's newline (which is kept)."""
    if b"\\" not in body:
        return body
    return b"\\".join(p.replace(b"\\n", b"\n") for p in body.split(b"\\\\"))


def _records(path: Path) -> Iterator[Tuple[int, bytes]]:
    """(number, stored text with its newline) of each record of ``path``."""
    with open(path, "rb") as f:
        for rec in f:
            tab = rec.index(b"\t")
            yield int(rec[:tab]), rec[tab + 1 :]


class ExternalSplit:
    """De-duplicate, shuffle (``seed``) and split a stream of lines into train.txt and
    valid.txt with the memory of one partition (see the module docstring).

    ``size_hint``: about how many bytes of text will be fed (it picks the number of
    partitions; a wrong hint costs time, not memory). ``part_bytes`` and ``max_files``: the
    text held at once and the temporary files open at once. Use as a context manager: the
    temporary files are removed when it exits."""

    def __init__(
        self,
        work_dir: os.PathLike,
        size_hint: int = 0,
        part_bytes: int = PART_BYTES,
        max_files: Optional[int] = None,
    ):
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix=".split-", dir=work_dir))
        self.part_bytes = max(1, part_bytes)
        self.max_files = max(2, max_files or max_open_files())
        self.lines = 0  # lines fed
        self.duplicates = 0  # lines dropped as copies of an earlier one (known after finish)
        self.distinct = 0
        self.phase, self.done, self.total = "read", 0, 0  # for progress lines: status()
        n = min(self.max_files, max(1, math.ceil(size_hint / self.part_bytes)))
        self._paths = [self.work / f"part{i}" for i in range(n)]
        self._files = [open(p, "wb") for p in self._paths]
        self._names = 0

    def __enter__(self) -> "ExternalSplit":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []
        shutil.rmtree(self.work, ignore_errors=True)

    def _name(self, what: str) -> Path:
        self._names += 1
        return self.work / f"{what}{self._names}"

    def feed(self, lines: Iterable[str], limit: int = 0) -> int:
        """Take ``lines`` (each without its newline; none empty) until they end or, with
        ``limit``, until ``limit`` lines in all have been fed (the rest is not read); returns
        the number fed in all."""
        files, n_files, count = self._files, len(self._files), self.lines
        if limit and count >= limit:
            return count
        for line in lines:
            data = line.encode("utf-8")
            if b"\\" in data or b"\n" in data:
                data = _stored(data)
            # Python's own hash (salted per process) is enough: only that the copies of a line
            # meet in one file matters, not which file
            files[hash(data) % n_files].write(b"%d\t%s\n" % (count, data))
            count += 1
            self.lines = count
            if count == limit:
                break
        return count

    def status(self) -> str:
        """Where the split is, for a progress line."""
        if self.phase == "read":
            return f"{self.lines:,} lines read"
        if self.phase == "de-duplicate":
            return (
                f"de-duplicated {self.done:,} of {self.total:,} partitions of {self.lines:,} "
                f"lines, {self.duplicates:,} duplicates dropped so far"
            )
        return f"{self.phase} {self.done:,} of {self.total:,} distinct lines"

    def finish(
        self, out_dir: os.PathLike, valid_fraction: float = 0.02, seed: int = 1
    ) -> Tuple[Path, Path, int, int]:
        """Write ``out_dir``/train.txt and valid.txt (each atomically); returns (train, valid,
        train lines, valid lines). Fewer than 2 distinct lines is a :class:`CorpusError`."""
        for f in self._files:
            f.close()
        self._files = []
        survivors, distinct_bytes = [], 0
        self.phase, self.done, self.total = "de-duplicate", 0, len(self._paths)
        for path in self._paths:
            kept, n, size = self._dedup(path, 0)
            survivors.append(kept)
            self.distinct += n
            distinct_bytes += size
            path.unlink()
            self.done += 1
        if self.distinct < 2:
            raise CorpusError(
                f"corpus has {self.distinct} non-empty distinct lines; need at least 2 to split "
                "train/valid"
            )
        u = self.distinct
        n_valid = max(1, int(u * valid_fraction))
        places = self._places(u, seed)
        try:
            ranges = self._scatter(survivors, places, u, distinct_bytes)
        finally:
            places.close(remove=True)
        out = Path(out_dir)
        train, valid = out / "train.txt", out / "valid.txt"
        self.phase, self.done = "wrote", 0
        with atomic_open(valid, "wb") as fv, atomic_open(train, "wb") as ft:
            for path, lo, hi in ranges:
                self._emit(path, lo, hi, n_valid, fv, ft)
        return train, valid, u - n_valid, n_valid

    # ---- 1. de-duplicate -------------------------------------------------------------------

    def _dedup(self, path: Path, level: int) -> Tuple[Path, int, int]:
        """The first copy of each line of partition ``path``, in order, into a new file;
        returns (that file, its lines, its bytes). Too much distinct text for one set: the
        partition is cut by another hash and each piece de-duplicated on its own."""
        kept = self._name("kept")
        seen: set = set()
        budget, held, dropped, size = GUARD * self.part_bytes, 0, 0, 0
        with open(path, "rb") as f, open(kept, "wb") as out:
            for rec in f:
                body = rec[rec.index(b"\t") + 1 :]
                if body in seen:
                    dropped += 1
                    continue
                seen.add(body)
                held += len(body) + SET_OVERHEAD
                if held > budget and len(seen) > 1:  # one line alone cannot be cut smaller
                    break
                out.write(rec)
                size += len(body)
            else:
                self.duplicates += dropped
                return kept, len(seen), size
        seen.clear()
        kept.unlink()
        pieces = self._cut(path, level + 1)
        results = [self._dedup(p, level + 1) for p in pieces]
        for p in pieces:
            p.unlink()
        merged = self._name("kept")
        with open(merged, "wb") as out:
            for number, body in heapq.merge(*(_records(p) for p, _, _ in results)):
                out.write(b"%d\t%s" % (number, body))
        for p, _, _ in results:
            p.unlink()
        return merged, sum(n for _, n, _ in results), sum(s for _, _, s in results)

    def _cut(self, path: Path, level: int) -> List[Path]:
        """Partition ``path`` again by a hash of (``level``, text): other groups than the
        partition's own hash made, every copy of a line still in one of them."""
        n = min(self.max_files, max(2, math.ceil(path.stat().st_size / self.part_bytes)))
        paths = [self._name("cut") for _ in range(n)]
        files = [open(p, "wb") for p in paths]
        try:
            with open(path, "rb") as f:
                for rec in f:
                    body = rec[rec.index(b"\t") + 1 :]
                    files[hash((level, body)) % n].write(rec)
        finally:
            for out in files:
                out.close()
        return paths

    # ---- 2. shuffle ------------------------------------------------------------------------

    def _places(self, u: int, seed: int) -> "_IntFile":
        """place[k]: where the k-th distinct line (first-seen order) lands in the order
        ``random.Random(seed).shuffle`` gives a list of ``u`` items."""
        self.phase, self.done, self.total = "shuffled", 0, u
        order = _IntFile(self._name("order"), u, identity=True)
        try:
            _shuffle_like_random(order, random.Random(seed), self)
            places = _IntFile(self._name("places"), u)
            self.phase, self.done = "placed", 0
            order.invert_into(places, self)
        finally:
            order.close(remove=True)
        return places

    # ---- 3. order --------------------------------------------------------------------------

    def _scatter(self, survivors: List[Path], places: "_IntFile", u: int, size: int):
        """Each distinct line, in first-seen order, to the file of its range of places; returns
        [(file, first place, end place)] in order of places."""
        self.phase, self.done, self.total = "sorted", 0, u
        n = min(self.max_files, max(1, math.ceil(size / self.part_bytes)))
        span = -(-u // n)
        n = -(-u // span)
        ranges = [(self._name("range"), b * span, min(u, (b + 1) * span)) for b in range(n)]
        files = [open(p, "wb") for p, _, _ in ranges]
        try:
            merged = heapq.merge(*(_records(p) for p in survivors))
            for k, ((_, body), place) in enumerate(zip(merged, places.values())):
                files[place // span].write(b"%d\t%s" % (place, body))
                if not k & 0xFFFF:
                    self.done = k
            self.done = u
        finally:
            for f in files:
                f.close()
        for p in survivors:
            p.unlink()
        return ranges

    def _emit(self, path: Path, lo: int, hi: int, n_valid: int, fv, ft) -> None:
        """Write the lines of places ``lo``..``hi`` - 1 (all in ``path``) in order, to ``fv``
        below ``n_valid``, else to ``ft``; a range too large for memory is cut into smaller
        ranges first."""
        if path.stat().st_size > GUARD * self.part_bytes and hi - lo > 1:
            n = min(self.max_files, max(2, math.ceil(path.stat().st_size / self.part_bytes)))
            span = -(-(hi - lo) // n)
            subs = [(self._name("range"), a, min(hi, a + span)) for a in range(lo, hi, span)]
            files = [open(p, "wb") for p, _, _ in subs]
            try:
                with open(path, "rb") as f:
                    for rec in f:
                        files[(int(rec[: rec.index(b"\t")]) - lo) // span].write(rec)
            finally:
                for f in files:
                    f.close()
            path.unlink()
            for sub in subs:
                self._emit(*sub, n_valid, fv, ft)
            return
        slots: List[Optional[bytes]] = [None] * (hi - lo)
        for place, body in _records(path):
            slots[place - lo] = body
        path.unlink()
        cut = min(max(n_valid - lo, 0), hi - lo)
        fv.writelines(map(_original, slots[:cut]))
        ft.writelines(map(_original, slots[cut:]))
        self.done += hi - lo


class _IntFile:
    """``n`` integers in a file mapped into memory (4 bytes each, 8 past 2**31 - 1), whose
    pages are handed back to the kernel (:meth:`release`) so that they do not stay resident."""

    def __init__(self, path: Path, n: int, identity: bool = False):
        import numpy as np

        self.path, self.n = path, n
        self.code = "i" if n < 2**31 else "q"
        dtype = np.int32 if self.code == "i" else np.int64
        with open(path, "wb") as f:
            if identity:
                for a in range(0, n, CHUNK):
                    f.write(np.arange(a, min(n, a + CHUNK), dtype=dtype).tobytes())
            else:
                f.truncate(n * np.dtype(dtype).itemsize)
        self._fd = os.open(path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, 0)
        self.view = memoryview(self._map).cast(self.code)
        self.array = np.frombuffer(self._map, dtype=dtype)

    def release(self) -> None:
        # MADV_DONTNEED on a shared file mapping keeps the data (in the file and the page
        # cache) and only drops this process's mapping of the pages: they no longer count in
        # its resident set, and the next access maps them again
        if hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)

    def invert_into(self, other: "_IntFile", split: ExternalSplit) -> None:
        """other[self[i]] = i for every i (a permutation's inverse), a chunk at a time."""
        import numpy as np

        for a in range(0, self.n, RELEASE_EVERY):
            b = min(self.n, a + RELEASE_EVERY)
            other.array[self.array[a:b]] = np.arange(a, b, dtype=other.array.dtype)
            self.release()
            other.release()
            split.done = b

    def values(self) -> Iterator[int]:
        """Its integers in order, read a chunk at a time."""
        for a in range(0, self.n, CHUNK):
            yield from self.array[a : a + CHUNK].tolist()
            if not a % RELEASE_EVERY:
                self.release()

    def close(self, remove: bool = False) -> None:
        self.view.release()
        del self.array
        try:
            self._map.close()
        except BufferError:  # a view still held after an error: unmapped when it goes
            pass
        os.close(self._fd)
        if remove:
            self.path.unlink()


def _shuffle_like_random(order: _IntFile, rng: random.Random, split: ExternalSplit) -> None:
    """``rng.shuffle(order)`` with the same draws and swaps as ``random.Random.shuffle`` (so the
    same permutation, which the tests check against it), with the mapped pages handed back
    every :data:`RELEASE_EVERY` swaps."""
    x, randbelow = order.view, rng._randbelow
    top = order.n - 1
    while top >= 1:
        low = max(0, top - RELEASE_EVERY)
        for i in range(top, low, -1):
            j = randbelow(i + 1)
            x[i], x[j] = x[j], x[i]
        order.release()
        split.done = order.n - 1 - low
        top = low
