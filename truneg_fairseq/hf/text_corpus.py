"""The text of a ``truneg-hf-train`` run as memory-mapped Arrow (HuggingFace ``datasets``),
tokenized once and read back by every later start and by every process of the run.

:func:`tokenized_text` reads the lines of ``--train`` / ``--valid``
(:mod:`truneg_fairseq.hf.text_inputs`) into Arrow, tokenizes them with a batched
``Dataset.map`` over worker processes and keeps the result in ``CACHE/truneg-hf-tokens/KEY/``
(``CACHE``: ``--cache-dir``, else datasets' own cache, ``HF_DATASETS_CACHE``); the untokenized
copy is deleted once the tokens are written. ``KEY`` is computed here, not by datasets (whose
hash pickles the tokenizer, which differs between processes): the sha256 of :data:`FORMAT`, each
input file's path, size and modification time, the tokenizer's content and ``--seq-len``. A
process that finds the entry complete memory-maps it; one that does not takes the entry's lock,
builds it (unless another process did meanwhile) and renames it into place whole: the processes
of a torchrun job, and every resumed run, tokenize once in all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from truneg_fairseq.errors import HFTrainError
from truneg_fairseq.hf.text_inputs import (
    LINES_PER_ROW,
    TextSource,
    line_groups,
    text_source,
)

logger = logging.getLogger(__name__)

FORMAT = 1  # what an entry holds; a new value gives new keys, never a misread old entry
CACHE_NAME = "truneg-hf-tokens"
RECORD = "corpus.json"  # written last: an entry without it is not there
# below these a process costs more to start than it saves (rows: lines to tokenize)
ROWS_PER_WORKER = 20_000
BYTES_PER_READER = 4 << 20
MAX_WORKERS = 8
# the per-token columns of a tokenized dataset the collator reads
ROW_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")


def _line_rows(files: List[str], flag: str, report: str):
    """``Dataset.from_generator``'s rows: the lines of ``files`` in groups, so that Arrow, not
    one Python dict per line, carries them. A bad file's message is also written into the
    folder ``report``: a worker's exception reaches the caller without it (datasets wraps it,
    and the wrapper crosses the process boundary without its cause)."""
    try:
        for group in line_groups(files, flag):
            yield {"lines": group}
    except HFTrainError as e:
        (Path(report) / f"{os.getpid()}.error").write_text(str(e), encoding="utf-8")
        raise


def _tokenize_rows(batch: Dict[str, list], tokenizer, seq_len: int, column: str) -> dict:
    """``Dataset.map``'s function: the non-empty lines of a batch, stripped, as ids cut at
    ``seq_len``; empty lines give no row."""
    from truneg_fairseq.hf.collator import tokenize_lines

    values = batch[column]
    if column == "lines":
        values = [line for group in values for line in group]
    lines = [s for s in (v.strip() for v in values if v) if s]
    return {"input_ids": tokenize_lines(tokenizer, lines, seq_len) if lines else []}


# ---- the cache key -----------------------------------------------------------------------------
def tokenizer_digest(tokenizer) -> str:
    """The sha256 of what decides the ids: the tokenizer's class, its whole pipeline as the
    ``tokenizers`` library serialises it (vocabulary, normalisation, special tokens) or, for a
    tokenizer without one, its vocabulary, and its truncation side."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        pipeline = json.loads(backend.to_str())
        # set by each call from its arguments (tokenizing changes them): not the tokenizer's
        pipeline.pop("truncation", None)
        pipeline.pop("padding", None)
        h.update(json.dumps(pipeline, sort_keys=True).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    special = [str(t) for t in tokenizer.all_special_tokens]
    h.update(json.dumps([special, getattr(tokenizer, "truncation_side", "right")]).encode())
    return h.hexdigest()


def _file_identity(path: Path) -> list:
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def source_identity(src: TextSource) -> list:
    """The inputs' identity: each file's resolved path, size and modification time (reading
    every byte of a large corpus at each start would cost what the cache saves); a dataset
    object's own fingerprint and files."""
    if src.saved is not None:
        return [_file_identity(f) for f in sorted(src.saved.iterdir()) if f.is_file()]
    if src.dataset is not None:
        files = [Path(c["filename"]) for c in src.dataset.cache_files]
        return [src.dataset._fingerprint, *(_file_identity(f) for f in files)]
    return [_file_identity(f) for f in src.files]


def cache_key(src: TextSource, tokenizer, seq_len: int) -> str:
    what = {
        "format": FORMAT,
        "inputs": source_identity(src),
        "tokenizer": tokenizer_digest(tokenizer),
        "seq_len": int(seq_len),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def cache_root(cache_dir: Optional[str]) -> Path:
    if cache_dir:
        base = cache_dir
    else:
        base = os.environ.get("HF_DATASETS_CACHE")
        if not base:
            import datasets

            base = datasets.config.HF_DATASETS_CACHE
    return Path(base).expanduser() / CACHE_NAME


def default_workers() -> int:
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


# ---- the tokenized rows ------------------------------------------------------------------------
class IndexedRows:
    """Tokenized lines for ``Trainer``, read from a memory-mapped ``datasets.Dataset``
    (``data``): item ``i`` is its row (``input_ids``, and a tokenized dataset's
    ``attention_mask``, ``token_type_ids``, ``special_tokens_mask`` when it has them) with
    ``"index": i`` (the index and the epoch choose its mask). ``built``: this process tokenized
    it; ``cache``: the cache entry it is read from."""

    def __init__(self, data, built: bool = False, cache: Optional[Path] = None):
        columns = [c for c in ROW_COLUMNS if c in data.column_names]
        self.data = data.with_format("numpy", columns=columns)
        self.built, self.cache = built, cache

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        return {**self.data[int(i)], "index": int(i)}


def _count_at_least(data, seq_len: int) -> int:
    """Rows of ``seq_len`` tokens or more (the lines cut), counted chunk by chunk in Arrow."""
    import pyarrow.compute as pc

    column = data.data.table.column("input_ids")
    lengths = (pc.list_value_length(chunk) for chunk in column.chunks)
    return sum(int(pc.sum(pc.greater_equal(n, seq_len)).as_py() or 0) for n in lengths)


def _workers_for(workers: int, rows: int) -> Optional[int]:
    n = max(1, min(workers, rows // ROWS_PER_WORKER))
    return n if n > 1 else None  # None: in this process, no pool to start


def _text_dataset(src: TextSource, where: Path, workers: int):
    """The untokenized rows: the dataset given, the saved one, or the files' lines read into
    Arrow under ``where`` (one reading process per file, up to ``workers``)."""
    import datasets
    from datasets import Dataset, Features, Value, load_from_disk

    if src.dataset is not None:
        return src.dataset
    if src.saved is not None:
        return load_from_disk(str(src.saved))
    size = sum(f.stat().st_size for f in src.files)
    procs = min(workers, len(src.files), max(1, size // BYTES_PER_READER))
    report = where / "errors"
    report.mkdir(parents=True)
    try:
        return Dataset.from_generator(
            _line_rows,
            features=Features({"lines": datasets.List(Value("string"))}),
            cache_dir=str(where),
            gen_kwargs={
                "files": [str(f) for f in src.files],
                "flag": src.flag,
                "report": str(report),
            },
            num_proc=procs if procs > 1 else None,
            fingerprint=f"{where.parent.name[:24]}-lines",
            writer_batch_size=16,  # rows of 1000 lines: 16k lines in memory before a write
        )
    except Exception:
        said = sorted(report.glob("*.error"))
        if said:
            raise HFTrainError(said[0].read_text(encoding="utf-8")) from None
        raise


def _text_column(data, src: TextSource) -> str:
    for column in ("lines", "text"):
        if column in data.column_names:
            return column
    raise HFTrainError(
        f"{src.flag} {src.shown} has columns {', '.join(data.column_names) or '(none)'}: give "
        "one with a 'text' column (one example a row) or an 'input_ids' column (tokenized)"
    )


def _build(src: TextSource, tokenizer, seq_len: int, entry: Path, workers: int) -> None:
    """Tokenize ``src`` into ``entry`` (built beside it, renamed into place whole)."""
    import datasets
    from datasets import Features, Value

    tmp = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bars_off = not sys.stderr.isatty() and datasets.is_progress_bar_enabled()
    if bars_off:
        datasets.disable_progress_bars()  # no progress bars in a log file
    start = time.time()
    try:
        text = _text_dataset(src, tmp / "text", workers)
        column = _text_column(text, src)
        if column == "lines":
            import pyarrow.compute as pc

            groups = text.data.table.column("lines").chunks
            lines = sum(int(pc.sum(pc.list_value_length(c)).as_py() or 0) for c in groups)
        else:
            lines = len(text)
        dtype = "uint16" if len(tokenizer) <= 1 << 16 else "int32"  # half the disk for BERT's
        procs = _workers_for(workers, lines)
        tokens = text.map(
            _tokenize_rows,
            batched=True,
            batch_size=1 if column == "lines" else LINES_PER_ROW,
            remove_columns=text.column_names,
            fn_kwargs={"tokenizer": tokenizer, "seq_len": seq_len, "column": column},
            features=Features({"input_ids": datasets.List(Value(dtype))}),
            num_proc=procs,
            cache_file_name=str(tmp / "tokens.arrow"),
            new_fingerprint=entry.name,
            desc=f"tokenizing {src.flag}",
        )
        record = {
            "format": FORMAT,
            "inputs": source_identity(src),
            "tokenizer": tokenizer_digest(tokenizer),
            "seq_len": seq_len,
            "files": [Path(c["filename"]).name for c in tokens.cache_files],
            "rows": len(tokens),
            "empty": lines - len(tokens),
            "cut": _count_at_least(tokens, seq_len),
            "workers": procs or 1,
            "seconds": round(time.time() - start, 3),
        }
        del text, tokens
        shutil.rmtree(tmp / "text", ignore_errors=True)  # the untokenized copy
        with open(tmp / RECORD, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
        os.rename(tmp, entry)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if bars_off:
            datasets.enable_progress_bars()


def _load(entry: Path):
    """(dataset, record) of a complete entry, memory-mapped; None when it is not there whole."""
    try:
        record = json.loads((entry / RECORD).read_text(encoding="utf-8"))
        files = [entry / name for name in record["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("format") != FORMAT or not all(f.is_file() for f in files):
        return None
    from datasets import Dataset, concatenate_datasets

    parts = [Dataset.from_file(str(f)) for f in files]
    return (parts[0] if len(parts) == 1 else concatenate_datasets(parts)), record


def _locked_build(src, tokenizer, seq_len, entry: Path, workers: int):
    """The entry, built by this process unless another one builds or built it (its lock)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(entry.with_name(entry.name + ".lock")))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.info(f"{src.flag}: another process is tokenizing it into {entry}; waiting")
        lock.acquire()
    try:
        found = _load(entry)
        if found is not None:
            return (*found, False)
        shutil.rmtree(entry, ignore_errors=True)  # an entry left incomplete by hand
        for stale in entry.parent.glob(entry.name + ".tmp-*"):  # a killed build's
            shutil.rmtree(stale, ignore_errors=True)
        _build(src, tokenizer, seq_len, entry, workers)
        found = _load(entry)
        return (*found, True)
    finally:
        lock.release()


def tokenized_text(
    value,
    flag: str,
    tokenizer,
    seq_len: int,
    cache_dir: Optional[str] = None,
    workers: Optional[int] = None,
) -> IndexedRows:
    """``value`` (see :func:`text_source`) tokenized as memory-mapped Arrow: one example per
    non-empty line, cut at ``seq_len`` tokens (the log counts the lines left out and cut); read
    from the cache when an earlier run or another process built it. ``workers``: processes
    that tokenize (default :func:`default_workers`)."""
    src = text_source(value, flag)
    workers = workers or default_workers()
    if src.saved is not None or src.dataset is not None:
        given = _given_dataset(src, tokenizer, seq_len)
        if given is not None:
            return given
    root = cache_root(cache_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as e:
        raise HFTrainError(
            f"cannot write the tokenized {flag} into {root} ({e.strerror}): give --cache-dir a "
            "writable directory"
        ) from None
    entry = root / cache_key(src, tokenizer, seq_len)
    found = _load(entry)
    try:
        data, record, built = (
            (*found, False) if found else _locked_build(src, tokenizer, seq_len, entry, workers)
        )
    except OSError as e:  # the cache's disk full, or taken away (the inputs' errors are said)
        raise HFTrainError(
            f"writing the tokenized {flag} into {root} failed ({e}): free space there, or give "
            "--cache-dir another directory (the tokens take 2-4 bytes a token, and the text's "
            "size again while they are written)"
        ) from None
    how = (
        f"tokenized in {record['seconds']:.1f} s by {record['workers']} process(es) into {entry}"
        if built
        else f"read from the cache {entry}, tokenized before"
    )
    logger.info(
        f"{flag} {src.shown}: {record['rows']} examples (one per non-empty line; "
        f"{record['empty']} empty lines left out, {record['cut']} lines cut at --seq-len "
        f"{seq_len}); {how}"
    )
    if not record["rows"]:
        raise HFTrainError(f"{flag} {src.shown} holds no text (empty lines only)")
    return IndexedRows(data, built, entry)


def _given_dataset(src: TextSource, tokenizer, seq_len: int) -> Optional[IndexedRows]:
    """A saved or given dataset already tokenized (``input_ids``) as it is, its rows checked
    against ``seq_len``; an in-memory one with text tokenized in memory (nothing to key a cache
    on); None: text to tokenize through the cache."""
    from datasets import load_from_disk

    data = src.dataset if src.dataset is not None else load_from_disk(str(src.saved))
    if "input_ids" in data.column_names and "text" not in data.column_names:
        import pyarrow.compute as pc

        chunks = data.data.table.column("input_ids").chunks
        longest = max(
            (int(pc.max(pc.list_value_length(c)).as_py() or 0) for c in chunks), default=0
        )
        if longest > seq_len:
            raise HFTrainError(
                f"{src.flag} {src.shown} holds rows of up to {longest} tokens, more than "
                f"--seq-len {seq_len}: tokenize it with truncation to {seq_len}, or give its text"
            )
        logger.info(f"{src.flag} {src.shown}: {len(data)} examples, tokenized already")
        return IndexedRows(data)
    if src.dataset is not None and not src.dataset.cache_files:
        column = _text_column(data, src)
        tokens = data.map(
            _tokenize_rows,
            batched=True,
            remove_columns=data.column_names,
            fn_kwargs={"tokenizer": tokenizer, "seq_len": seq_len, "column": column},
            keep_in_memory=True,
            new_fingerprint=hashlib.sha256(f"{data._fingerprint}{seq_len}".encode()).hexdigest(),
        )
        logger.info(f"{src.flag} {src.shown}: {len(tokens)} examples, tokenized in memory")
        return IndexedRows(tokens)
    return None


# ---- a run's text -------------------------------------------------------------------------------
def run_text(cfg, tokenizer):
    """(train, valid) for ``Trainer``: memory-mapped :class:`IndexedRows` (``valid`` None
    without ``--valid``), or with ``--streaming`` a
    :class:`~truneg_fairseq.hf.streamed_text.StreamedText` for training."""
    kw = dict(
        cache_dir=getattr(cfg, "cache_dir", None),
        workers=getattr(cfg, "preprocessing_workers", None),
    )
    if getattr(cfg, "streaming", False):
        from truneg_fairseq.hf.streamed_text import StreamedText

        src = text_source(cfg.train, "--train", streaming=True)
        logger.info(
            f"--train {src.shown}: streamed ({len(src.files)} file(s) read and tokenized as "
            f"training goes, in file order, cut at --seq-len {cfg.seq_len})"
        )
        train = StreamedText(src.files, "--train", tokenizer, cfg.seq_len)
    else:
        train = tokenized_text(cfg.train, "--train", tokenizer, cfg.seq_len, **kw)
    valid = (
        tokenized_text(cfg.valid, "--valid", tokenizer, cfg.seq_len, **kw) if cfg.valid else None
    )
    return train, valid
