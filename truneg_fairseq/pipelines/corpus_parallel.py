"""The corpus pipeline's heavy stages over worker processes: tokenizing a split (batches of
lines, with the count of every symbol) and binarizing it with a fairseq dictionary.

A split's text file is cut at line ends into chunks; each chunk is one job of a pool of
``workers`` processes (forked, ended with the parent: :mod:`truneg_fairseq.pipelines.children`)
that writes its part beside the output; the parts are joined in order, so the result does not
depend on the number of workers. ``workers`` = 1 runs the jobs in this process. Each job keeps
its line and symbol counts in shared memory, read by a progress thread (:class:`Progress`).

Binarizing writes what ``fairseq-preprocess --only-source --dataset-impl mmap`` writes, byte for
byte: fairseq's :class:`~fairseq.data.Dictionary` built from the same counts (or loaded from
``--dict``), each line's ids with ``</s>`` appended, unknown symbols as ``<unk>``, the ``.bin``
in the dtype fairseq picks for the dictionary's size and the ``.idx`` from fairseq's own index
writer; about a tenth of fairseq-preprocess's CPU time (no tensor per line).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable, List, Sequence, Tuple

import numpy as np

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.pipelines.children import children_end_with_us

BATCH = 2048  # lines tokenized in one call
CHUNK = 8 << 20  # bytes of text per job (at most)
MIN_CHUNK = 64 << 10  # smaller files are not cut further than this


class Progress:
    """Progress lines of one stage in the command's log, at most one per ``every`` seconds
    while the stage runs, and one when it ends: ``message()`` says where it is."""

    def __init__(self, log: logging.Logger, every: float, message: Callable[[], str]):
        self.log, self.every, self.message = log, max(every, 0.05), message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.every):
            self.log.info(self.message())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            self.log.info(self.message())


def cut(path: os.PathLike, workers: int, at_least: int = 1) -> List[Tuple[int, int]]:
    """(start, end) byte ranges of ``path`` that begin and end at line starts: at least
    ``workers`` of them (for a file of more than ``workers`` x 64 KiB) and ``at_least`` (where
    the lines allow), at most 8 MiB each."""
    size = os.path.getsize(path)
    n = max(1, min(workers, size // MIN_CHUNK), at_least)
    n = max(n, -(-size // CHUNK))
    bounds = [0]
    with open(path, "rb") as f:
        for i in range(1, n):
            f.seek(max(size * i // n, bounds[-1]))
            if f.tell() > 0:
                f.seek(f.tell() - 1)
                f.readline()  # to the start of the next line
            bounds.append(f.tell())
    bounds.append(size)
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a] or [(0, 0)]


def _lines(path, start: int, end: int):
    """The lines (without newline) of ``path[start:end]``, in batches."""
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        batch: List[str] = []
        while left > 0:
            raw = f.readline(left)
            if not raw:
                break
            left -= len(raw)
            batch.append(raw.decode("utf-8").rstrip("\n"))
            if len(batch) == BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


# ---- worker side ------------------------------------------------------------------------------

_W: dict = {}  # this worker's tokenizer or dictionary, and the shared counters


def _init_encoder(spec, counters):
    from truneg_fairseq.text import build_tokenizer

    _W.update(tokenizer=build_tokenizer(spec), counters=counters)


def _encode_job(job):
    """Tokenize one chunk into its part file; returns the symbol counts (``</s>`` once a line,
    as fairseq counts it)."""
    i, src, start, end, part, eos = job
    tok, counters = _W["tokenizer"], _W["counters"]
    counts: Counter = Counter()
    lines = pieces = 0
    with open(part, "w", encoding="utf-8") as out:
        for batch in _lines(src, start, end):
            for text in tok.encode_lines(batch):
                symbols = text.split()
                counts.update(symbols)
                pieces += len(symbols)
                out.write(text)
                out.write("\n")
            lines += len(batch)
            counters[2 * i], counters[2 * i + 1] = lines, pieces
    counts[eos] += lines
    return counts


def _init_binarizer(dict_path, counters):
    from fairseq.data import Dictionary

    d = Dictionary.load(str(dict_path))
    _W.update(dictionary=d, counters=counters)


def _binarize_job(job):
    """ids of each line of one tokenized chunk (``</s>`` appended) into ``part``, each line's
    length into ``part``.sizes (int32); returns (lines, tokens, symbols replaced by <unk>)."""
    from fairseq.data.indexed_dataset import best_fitting_int_dtype

    i, src, start, end, part = job
    d, counters = _W["dictionary"], _W["counters"]
    get, unk, eos, unk_word = d.indices.get, d.unk_index, d.eos_index, d.unk_word
    dtype = best_fitting_int_dtype(len(d))
    sizes: List[int] = []
    replaced = lines = tokens = 0
    with open(part, "wb") as out:
        for batch in _lines(src, start, end):
            ids: List[int] = []
            for line in batch:
                words = line.split()
                ids_line = [get(w, unk) for w in words]
                if unk in ids_line:
                    replaced += sum(
                        1 for w, j in zip(words, ids_line) if j == unk and w != unk_word
                    )
                ids_line.append(eos)
                ids += ids_line
                sizes.append(len(ids_line))
            out.write(np.asarray(ids, dtype=dtype).tobytes())
            lines += len(batch)
            tokens += len(ids)
            counters[2 * i], counters[2 * i + 1] = lines, tokens
    np.asarray(sizes, dtype=np.int32).tofile(f"{part}.sizes")
    return lines, tokens, replaced


# ---- parent side ------------------------------------------------------------------------------


def _worker_main(conn, fn, jobs, init, initargs):
    """A worker: its jobs in order, each result (or the error) sent back on ``conn``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # told to stop, it just stops
    if hasattr(signal, "pthread_sigmask"):  # held by the parent over the fork (_sigterm_held)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        init(*initargs)
        for k, job in jobs:
            conn.send((k, True, fn(job)))
    except BaseException as e:  # noqa: BLE001 - any failure goes to the parent
        try:
            conn.send((-1, False, e))
        except Exception:  # not picklable
            conn.send((-1, False, RuntimeError(f"{type(e).__name__}: {e}")))
    finally:
        conn.close()


def _run_jobs(fn, jobs, workers: int, init, initargs, on_result=None):
    """``fn`` over ``jobs``, results in order: in this process with one worker, else over
    ``workers`` forked processes (job k goes to worker k mod ``workers``), each with its own
    pipe back, that end with this process (no shared queue, so killing one blocks no other).
    With ``on_result``, each result goes to ``on_result(k, result)`` as it comes (in any order)
    and none is kept: a corpus of thousands of chunks does not hold thousands of results."""
    if workers <= 1 or len(jobs) <= 1:
        init(*initargs)
        if on_result is None:
            return [fn(j) for j in jobs]
        for k, j in enumerate(jobs):
            on_result(k, fn(j))
        return None

    ctx = fork_context()
    n = min(workers, len(jobs))
    procs, conns = [], {}
    results: dict = {}
    received = 0
    with children_end_with_us():
        try:
            for w in range(n):
                mine = [(k, job) for k, job in enumerate(jobs) if k % n == w]
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(
                    target=_worker_main, args=(send, fn, mine, init, initargs), daemon=True
                )
                with _sigterm_held():
                    p.start()
                send.close()
                procs.append(p)
                conns[recv] = p
            while conns:
                for conn in wait(list(conns), timeout=0.5):  # signals handled between waits
                    try:
                        k, ok, value = conn.recv()
                    except EOFError:
                        conns.pop(conn)
                        continue
                    if not ok:
                        raise value
                    received += 1
                    if on_result is None:
                        results[k] = value
                    else:
                        on_result(k, value)
            if received != len(jobs):
                codes = [p.exitcode for p in procs]
                raise RuntimeError(
                    f"a worker process ended without its results (exit codes {codes})"
                )
            return None if on_result is not None else [results[k] for k in range(len(jobs))]
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join()


@contextlib.contextmanager
def _sigterm_held():
    """A SIGTERM that comes while a worker is forked waits until the fork is done: its handler
    (:mod:`~truneg_fairseq.pipelines.children`) would otherwise run inside the interpreter's
    at-fork callbacks, which print and drop the SystemExit it raises, and the command would go
    on with its workers killed."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _shared(n: int):
    return mp.RawArray("q", 2 * n)


def _join(parts: Sequence[Path], dst: Path) -> None:
    """Concatenate ``parts`` into ``dst`` (written beside it, then renamed) and remove them."""
    from truneg_fairseq.outputs import temp_beside

    tmp = temp_beside(dst)
    try:
        with open(tmp, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for p in parts:
        p.unlink(missing_ok=True)


@dataclass
class Encoded:
    """A tokenized split: where, its line and symbol counts (``</s>`` included)."""

    path: Path
    lines: int
    counts: Counter = field(default_factory=Counter)

    @property
    def symbols(self) -> int:
        return sum(self.counts.values()) - self.lines


def encode_split(
    spec, src: os.PathLike, dst: os.PathLike, workers: int, log, every: float, name: str
) -> Encoded:
    """Tokenize ``src`` (one text a line) into ``dst`` (its symbols, space-separated: the input
    of fairseq-preprocess), with the tokenizer ``spec`` names, in batches over ``workers``."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    ranges = cut(src, workers)
    counters = _shared(len(ranges))
    parts = [dst.with_name(f".{dst.name}.part{i}") for i in range(len(ranges))]
    jobs = [(i, str(src), a, b, str(p), "</s>") for i, ((a, b), p) in enumerate(zip(ranges, parts))]

    def message():
        n, pieces = sum(counters[0::2]), sum(counters[1::2])
        return f"encode {name}: {n:,} lines read, {pieces:,} pieces written"

    total: Counter = Counter()
    try:
        with Progress(log, every, message):
            _run_jobs(
                _encode_job,
                jobs,
                workers,
                _init_encoder,
                (spec, counters),
                on_result=lambda k, counts: total.update(counts),
            )
        _join(parts, dst)
    finally:
        for p in parts:
            p.unlink(missing_ok=True)
    return Encoded(dst, sum(counters[0::2]), total)


def build_dictionary(counts: Counter, nwords: int = -1):
    """The dictionary fairseq-preprocess builds from a text with these symbol counts
    (``--nwordssrc nwords``; -1: every symbol)."""
    from fairseq.data import Dictionary

    d = Dictionary()
    for word, n in sorted(counts.items()):
        d.add_symbol(word, n)
    d.finalize(threshold=-1, nwords=nwords, padding_factor=8)
    return d


def binarize_split(
    dict_path: os.PathLike,
    src: Encoded,
    prefix: os.PathLike,
    workers: int,
    log,
    every: float,
    name: str,
    n_symbols: int,
    shards: int = 1,
):
    """``prefix``.bin/.idx of the tokenized split ``src`` with the dictionary ``dict_path`` (of
    ``n_symbols`` entries), in ``shards`` shards (:mod:`.corpus_shards`); returns fairseq's
    :class:`~fairseq.binarizer.BinarizeSummary`."""
    from fairseq.binarizer import BinarizeSummary
    from fairseq.data.indexed_dataset import best_fitting_int_dtype

    from truneg_fairseq.data.corpus_steps import write_mmap_index
    from truneg_fairseq.pipelines.corpus_shards import write_shards

    prefix = Path(prefix)
    ranges = cut(src.path, workers, at_least=shards)
    if len(ranges) < shards:
        raise CorpusError(f"--shards {shards}: the {name} split has too few lines for that many")
    counters = _shared(len(ranges))
    parts = [prefix.with_name(f".{prefix.name}.bin.part{i}") for i in range(len(ranges))]
    jobs = [(i, str(src.path), a, b, str(p)) for i, ((a, b), p) in enumerate(zip(ranges, parts))]
    total = src.lines

    def message():
        n, t = sum(counters[0::2]), sum(counters[1::2])
        return (
            f"binarize {name}: {n:,} of {total:,} lines ({100 * n // max(total, 1)}%), {t:,} tokens"
        )

    done = {"lines": 0, "tokens": 0, "replaced": 0}
    lines = [0] * len(ranges)

    def add(k, result):
        lines[k] = result[0]
        for key, n in zip(("lines", "tokens", "replaced"), result):
            done[key] += n

    try:
        with Progress(log, every, message):
            _run_jobs(
                _binarize_job,
                jobs,
                workers,
                _init_binarizer,
                (dict_path, counters),
                on_result=add,
            )
        dtype = best_fitting_int_dtype(n_symbols)
        write_shards(prefix, parts, lines, dtype, shards, _join, write_mmap_index)
    finally:
        for p in parts:
            p.unlink(missing_ok=True)
            Path(f"{p}.sizes").unlink(missing_ok=True)
    summary = BinarizeSummary(
        num_seq=done["lines"],
        replaced=Counter({"<unk>": done["replaced"]}),
        num_tok=done["tokens"],
    )
    return summary


@contextlib.contextmanager
def heartbeat(log, every: float, what: str):
    """A progress line every ``every`` seconds while a step that cannot count its work runs."""
    t0 = time.time()
    with Progress(log, every, lambda: f"{what}: {time.time() - t0:.0f} s"):
        yield


def fork_context():
    return mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
