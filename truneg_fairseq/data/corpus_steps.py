"""Corpus preparation: the built-in WordNet-gloss corpus, sentencepiece, fairseq binarization.

The pipeline is raw text -> a tokenizer (:mod:`truneg_fairseq.text`; by default a
sentencepiece model trained on the corpus) -> ``fairseq-preprocess
--only-source`` -> data-bin/ (dict.txt + mmap shards). Every output is written atomically (to a
temporary name, then renamed), so an interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from truneg_fairseq.data.unknown_tokens import (  # noqa: F401  (their home before)
    UNKNOWN_WARNING,
    report_unknown_rates,
    unknown_cause,
    unknown_rate,
)
from truneg_fairseq.errors import CorpusError
from truneg_fairseq.outputs import WRITE_ERRNOS, atomic_dir, atomic_open, reading, temp_beside
from truneg_fairseq.text.lines import binary_lines

logger = logging.getLogger(__name__)


def atomic_write_lines(path: os.PathLike, lines: Iterable[str]) -> int:
    """Write ``lines`` (without newlines) to ``path`` atomically; return the line count."""
    n = 0
    with atomic_open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            f.write("\n")
            n += 1
    return n


# ---- reading text files -----------------------------------------------------------------------

_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "lzma"}


def _open_binary(path: Path):
    """Open ``path`` for reading bytes, decompressing gzip/bzip2/xz files (found by their magic
    bytes, whatever the file name says)."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, module in _COMPRESSED.items():
        if head.startswith(magic):
            return importlib.import_module(module).open(path, "rb")
    return open(path, "rb")


def text_size_hint(path: os.PathLike) -> int:
    """About how many bytes of text ``path`` holds: its size, times 4 when it is compressed
    (about what gzip, bzip2 and xz make of English text; only a hint, for sizing work)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(6)
        size = path.stat().st_size
    except OSError:
        return 0
    return size * 4 if any(head.startswith(m) for m in _COMPRESSED) else size


def read_text_lines(path: os.PathLike) -> Iterator[str]:
    """Lines of a UTF-8 text file (plain, .gz, .bz2 or .xz), newline and a leading BOM removed.

    A NUL byte or bytes that are not UTF-8 mean the file is not text (a binary file, another
    encoding): ``CorpusError`` names the file and the line, instead of a data-bin of garbage."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"--input {path} not found")
    reading(path, "text file")  # an output of the command may not be it
    try:
        with _open_binary(path) as f:
            for i, raw in enumerate(binary_lines(f, name=path), 1):
                if b"\0" in raw:
                    raise CorpusError(
                        f"{path}, line {i}: NUL byte (a binary file?); give plain UTF-8 text, one "
                        f"sentence or document per line (.gz/.bz2/.xz are read too)"
                    )
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise CorpusError(
                        f"{path}, line {i}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                        f"convert it first, e.g. iconv -f latin1 -t utf-8"
                    ) from None
                if i == 1:
                    line = line.lstrip("\ufeff")
                yield line.rstrip("\r\n")
    except (OSError, EOFError) as e:  # a truncated or corrupt compressed file
        raise CorpusError(f"{path}: cannot be read ({e})") from None


# ---- the built-in corpus ----------------------------------------------------------------------

_QUOTED = re.compile(r'"([^"]+)"')


def wordnet_gloss_lines(wn=None, headwords: bool = False) -> Iterator[str]:
    """Definitions and example sentences from WordNet's data files, one per line.

    Each synset's gloss (the text after ``|``) holds a definition followed by quoted examples;
    each becomes a line. About 118k glosses, 1.4M words of English. With ``headwords`` the
    definition line starts as a dictionary entry does, with the synset's words: "chief, main,
    primary, principal: most important element" (multi-word entries with spaces).
    """
    if wn is None:
        from truneg_fairseq.lexicon import load_wordnet

        wn = load_wordnet()
    for pos in ("noun", "verb", "adj", "adv"):
        with wn.open(f"data.{pos}") as f:
            for raw in f:
                line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
                if line.startswith("  ") or "|" not in line:
                    continue  # licence header
                head, gloss = line.split("|", 1)
                gloss = gloss.strip()
                examples = _QUOTED.findall(gloss)
                definition = _QUOTED.sub("", gloss).strip(" ;")
                if headwords:
                    definition = ", ".join(_synset_words(head)) + ": " + definition
                for text in [definition] + examples:
                    text = " ".join(text.split())
                    if len(text.split()) >= 3:
                        yield text


def _synset_words(head: str) -> List[str]:
    """The words of a data-file line's synset ("offset lexfile pos count word lex_id ...";
    count in hex; adjective markers such as "(a)" removed, underscores as spaces)."""
    fields = head.split()
    n = int(fields[3], 16)
    return [re.sub(r"\([a-z]+\)$", "", fields[4 + 2 * i]).replace("_", " ") for i in range(n)]


def write_split_corpus(
    lines: Iterable[str], out_dir: os.PathLike, valid_fraction: float = 0.02, seed: int = 1
) -> Tuple[Path, Path, int, int]:
    """Deduplicate, shuffle (seeded) and split ``lines`` (those with more than whitespace)
    into train.txt / valid.txt; returns (train, valid, train lines, valid lines). A stream:
    ``lines`` may be a generator, and memory does not grow with it
    (:class:`~truneg_fairseq.data.corpus_split.ExternalSplit`, which says the exact order)."""
    from truneg_fairseq.data.corpus_split import ExternalSplit

    with ExternalSplit(out_dir) as split:
        split.feed(line for line in lines if line.strip())
        return split.finish(out_dir, valid_fraction, seed)


# ---- sentencepiece ----------------------------------------------------------------------------


def train_sentencepiece(
    text_file: os.PathLike,
    model_prefix: os.PathLike,
    vocab_size: int = 8000,
    model_type: str = "unigram",
    input_sentence_size: int = 2_000_000,
    seed_sentencepiece_size: int = 1_000_000,
    in_child: bool = False,
    seed: Optional[int] = None,
) -> Path:
    """Train a sentencepiece model on ``text_file``; returns ``<model_prefix>.model``.

    fairseq adds its own specials (<s> <pad> </s> <unk>), so sentencepiece keeps only <unk>.
    ``in_child``: train in a new interpreter that imports sentencepiece only and is killed when
    this process dies (its memory is its own, and a signal here is handled at once); ``seed``:
    sentencepiece's random seed (its sample of the lines; None: a random one).
    """
    import sentencepiece as spm

    text_file = Path(text_file)
    if not text_file.is_file() or text_file.stat().st_size == 0:
        raise CorpusError(f"{text_file} is missing or empty: nothing to train sentencepiece on")
    prefix = Path(model_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    tmp_prefix = temp_beside(prefix, "")  # this run's own: .model and .vocab are added
    try:
        if seed is not None and not in_child:
            spm.set_random_generator_seed(seed)
        (_train_in_child if in_child else lambda kw, _: spm.SentencePieceTrainer.train(**kw))(
            dict(
                input=str(text_file),
                model_prefix=str(tmp_prefix),
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=1.0,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                unk_id=0,
                input_sentence_size=input_sentence_size,
                shuffle_input_sentence=True,
                seed_sentencepiece_size=seed_sentencepiece_size,
                minloglevel=2,
                num_threads=os.cpu_count() or 1,
                hard_vocab_limit=False,
            ),
            seed,
        )
        spm.SentencePieceProcessor(
            model_file=f"{tmp_prefix}.model"
        )  # a full disk leaves a truncated model
    except (OSError, RuntimeError) as e:
        for ext in (".model", ".vocab"):
            Path(f"{tmp_prefix}{ext}").unlink(missing_ok=True)
        free = shutil.disk_usage(prefix.parent).free
        raise CorpusError(
            f"sentencepiece training could not write its model in {prefix.parent} ({free / 2**20:.1f} MiB free: "
            f"{str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}); free space there or "
            "choose another --output-dir"
        ) from None
    for ext in (".model", ".vocab"):
        os.replace(f"{tmp_prefix}{ext}", f"{prefix}{ext}")
    return Path(f"{prefix}.model")


_SPM_CHILD = """
import ctypes, json, os, sys
try:
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: end with the parent
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
import sentencepiece
if sys.argv[3] != "None":
    sentencepiece.set_random_generator_seed(int(sys.argv[3]))
sentencepiece.SentencePieceTrainer.train(**json.loads(sys.argv[2]))
"""


def _train_in_child(kwargs: dict, seed: Optional[int]) -> None:
    """``SentencePieceTrainer.train(**kwargs)`` in a new interpreter; its error a RuntimeError."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SPM_CHILD, str(os.getpid()), json.dumps(kwargs), str(seed)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            while True:
                try:
                    rc = proc.wait(0.5)  # signals are handled between waits
                    break
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if rc != 0:
            err.seek(0)
            lines = err.read().strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"sentencepiece training ended with {rc}")


def encode_file(tokenizer, src: os.PathLike, dst: os.PathLike) -> int:
    """Tokenize ``src`` into space-separated dict.txt symbols (the input format of
    fairseq-preprocess). ``tokenizer``: a :class:`truneg_fairseq.text.Tokenizer`, or the path
    of a sentencepiece model."""
    from truneg_fairseq.text import Tokenizer, TokenizerSpec, build_tokenizer

    if not isinstance(tokenizer, Tokenizer):
        tokenizer = build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(tokenizer)))

    def gen():
        with open(src, encoding="utf-8") as f:
            batch: List[str] = []
            for line in f:
                batch.append(line.rstrip("\n"))
                if len(batch) == 4096:
                    yield from tokenizer.encode_lines(batch)
                    batch = []
            if batch:
                yield from tokenizer.encode_lines(batch)

    return atomic_write_lines(dst, gen())


# ---- fairseq binarization ---------------------------------------------------------------------


def binarize(
    trainpref: os.PathLike,
    validpref: os.PathLike,
    destdir: os.PathLike,
    workers: int = 1,
    srcdict: Optional[os.PathLike] = None,
    nwords: int = -1,
    name_as: Optional[os.PathLike] = None,
    report: bool = True,
) -> Path:
    """Run ``fairseq-preprocess --only-source`` into ``destdir`` (atomically: built beside it,
    then renamed into place). ``nwords`` > 0 keeps that many of the most frequent symbols in the
    dictionary built from the training text (the rest become ``<unk>``); -1 keeps them all.
    ``name_as``: the path the log names (where a staged ``destdir`` will be moved); ``report``:
    log each split's share of ``<unk>`` (:func:`report_unknown_rates`)."""
    destdir = Path(destdir)
    with atomic_dir(
        destdir, "fairseq-preprocess (truneg_fairseq.data.corpus_steps.binarize)"
    ) as tmp:
        argv = [
            "--only-source",
            "--trainpref",
            str(trainpref),
            "--validpref",
            str(validpref),
            "--destdir",
            str(tmp),
            "--workers",
            str(workers),
            "--dataset-impl",
            "mmap",
        ]
        if srcdict:
            argv += ["--srcdict", str(srcdict)]
        elif nwords > 0:
            argv += ["--nwordssrc", str(nwords)]
        run_preprocess(argv)
        if report:
            report_unknown_rates(tmp, name_as or destdir)
    return destdir


def write_mmap_index(path: Path, dtype, sizes_parts: Sequence[Path], n: int) -> None:
    """The ``.idx`` fairseq's ``MMapIndexedDataset.Index.writer(path, dtype).write(sizes)``
    writes, from the sizes of each part in order, a part at a time (that writer takes every
    size as one Python list: tens of bytes a sentence). Its layout: the header fairseq writes
    (magic, version, dtype code, then the number of sentences), every size as int32, then every
    sentence's byte offset in the ``.bin`` as int64."""
    import numpy as np
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    with MMapIndexedDataset.Index.writer(str(path), dtype) as index:
        index.write([])  # the header, with a count of 0 that is put right below
    itemsize = np.dtype(dtype).itemsize
    with open(path, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(struct.pack("<Q", n))
        for p in sizes_parts:
            with open(p, "rb") as part:
                shutil.copyfileobj(part, f, 16 << 20)
        offset = 0
        for p in sizes_parts:
            nbytes = np.fromfile(p, dtype=np.int32).astype(np.int64) * itemsize
            ends = np.cumsum(nbytes)
            f.write((ends - nbytes + offset).tobytes())
            offset += int(ends[-1]) if ends.size else 0


@contextlib.contextmanager
def without_commas(*files: os.PathLike):
    """fairseq-preprocess reads ``--validpref a,b`` as two splits, so a file whose path holds a
    comma (an output directory such as ``runs,v2``) would be read as files that do not exist:
    such files are linked, for the block, from a temporary directory without one."""
    if not any("," in str(f) for f in files):
        yield files
        return
    with tempfile.TemporaryDirectory(prefix="truneg-preprocess-") as tmp:
        linked = []
        for i, f in enumerate(files):
            if "," in str(f):
                link = Path(tmp) / f"{i}.{Path(f).name.replace(',', '_')}"
                os.symlink(os.path.abspath(f), link)
                f = link
            linked.append(f)
        yield tuple(linked)


def run_preprocess(argv: Sequence[str]) -> None:
    """``fairseq-preprocess ARGV`` in this process (a new interpreter would spend seconds
    importing torch and fairseq again for every split a pipeline binarizes). Its log goes where
    the command's does, to ``preprocess.log`` in the destination directory, and not into the
    caller's log; the file handler it adds is closed afterwards. A failure is a
    :class:`CorpusError`; a full disk stays an ``OSError`` for the caller's write check."""
    from fairseq import options
    from fairseq_cli import preprocess

    args = options.get_preprocessing_parser().parse_args(list(argv))
    log = logging.getLogger(preprocess.__name__)
    saved = list(log.handlers), log.propagate, log.level
    log.propagate = False
    log.setLevel(logging.INFO)
    try:
        preprocess.main(args)
    except OSError as e:
        if e.errno in WRITE_ERRNOS:
            raise
        raise CorpusError(f"fairseq-preprocess failed: {e}") from e
    except SystemExit as e:
        if e.code == 128 + 15:  # a SIGTERM of the command (pipelines.children): end as told
            raise
        raise CorpusError(f"fairseq-preprocess failed: {type(e).__name__}: {e}") from e
    except Exception as e:
        raise CorpusError(f"fairseq-preprocess failed: {type(e).__name__}: {e}") from e
    finally:
        for handler in log.handlers[len(saved[0]) :]:
            handler.close()
        log.handlers, log.propagate = saved[0], saved[1]
        log.setLevel(saved[2])
