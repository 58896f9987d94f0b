"""Corpus preparation: the built-in WordNet-gloss corpus, sentencepiece, fairseq binarization.

The pipeline is raw text -> a tokenizer (:mod:`truneg_fairseq.text`; by default a
sentencepiece model trained on the corpus) -> ``fairseq-preprocess
--only-source`` -> data-bin/ (dict.txt + mmap shards). Every output is written atomically (to a
temporary name, then renamed), so an interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.io_utils import WRITE_ERRNOS, atomic_dir, atomic_open

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
            import importlib

            return importlib.import_module(module).open(path, "rb")
    return open(path, "rb")


def read_text_lines(path: os.PathLike) -> Iterator[str]:
    """Lines of a UTF-8 text file (plain, .gz, .bz2 or .xz), newline and a leading BOM removed.

    A NUL byte or bytes that are not UTF-8 mean the file is not text (a binary file, another
    encoding): ``CorpusError`` names the file and the line, instead of a data-bin of garbage."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"--input {path} not found")
    try:
        with _open_binary(path) as f:
            for i, raw in enumerate(f, 1):
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
    lines: Sequence[str], out_dir: os.PathLike, valid_fraction: float = 0.02, seed: int = 1
) -> Tuple[Path, Path, int, int]:
    """Deduplicate, shuffle (seeded) and split ``lines`` into train.txt / valid.txt."""
    uniq = list(dict.fromkeys(line for line in lines if line.strip()))
    if len(uniq) < 2:
        raise CorpusError(
            f"corpus has {len(uniq)} non-empty distinct lines; need at least 2 to split train/valid"
        )
    rng = random.Random(seed)
    rng.shuffle(uniq)
    n_valid = max(1, int(len(uniq) * valid_fraction))
    out = Path(out_dir)
    train, valid = out / "train.txt", out / "valid.txt"
    atomic_write_lines(valid, uniq[:n_valid])
    atomic_write_lines(train, uniq[n_valid:])
    return train, valid, len(uniq) - n_valid, n_valid


# ---- sentencepiece ----------------------------------------------------------------------------


def train_sentencepiece(
    text_file: os.PathLike,
    model_prefix: os.PathLike,
    vocab_size: int = 8000,
    model_type: str = "unigram",
    input_sentence_size: int = 2_000_000,
    seed_sentencepiece_size: int = 1_000_000,
) -> Path:
    """Train a sentencepiece model on ``text_file``; returns ``<model_prefix>.model``.

    fairseq adds its own specials (<s> <pad> </s> <unk>), so sentencepiece keeps only <unk>.
    """
    import sentencepiece as spm

    text_file = Path(text_file)
    if not text_file.is_file() or text_file.stat().st_size == 0:
        raise CorpusError(f"{text_file} is missing or empty: nothing to train sentencepiece on")
    prefix = Path(model_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    tmp_prefix = prefix.parent / f".{prefix.name}.tmp{os.getpid()}"
    try:
        spm.SentencePieceTrainer.train(
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
    with atomic_dir(destdir, "fairseq-preprocess (truneg_fairseq.data.corpus.binarize)") as tmp:
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
    except (Exception, SystemExit) as e:
        raise CorpusError(f"fairseq-preprocess failed: {type(e).__name__}: {e}") from e
    finally:
        for handler in log.handlers[len(saved[0]) :]:
            handler.close()
        log.handlers, log.propagate = saved[0], saved[1]
        log.setLevel(saved[2])


UNKNOWN_WARNING = (
    5.0  # % of tokens that are <unk> above which the tokenizer or vocabulary is suspect
)


def unknown_rate(prefix: os.PathLike, unk: int = 3) -> Tuple[int, int]:
    """(``<unk>`` tokens, tokens) of a binarized split (``prefix``.bin/.idx): both the words
    fairseq-preprocess did not find in dict.txt and the tokenizer's own unknown pieces."""
    import numpy as np
    from fairseq.data import indexed_dataset

    ds = indexed_dataset.MMapIndexedDataset(str(prefix))
    try:
        tokens = np.frombuffer(ds._bin_buffer, dtype=ds._index.dtype)  # every token of the split
    except AttributeError:  # another fairseq layout: one sequence at a time
        tokens = np.concatenate([ds[i].numpy() for i in range(len(ds))]) if len(ds) else np.zeros(0)
    return int((tokens == unk).sum()), int(tokens.size)


def report_unknown_rates(
    data_dir: os.PathLike,
    shown_as: os.PathLike,
    tokenizer=None,
    texts: Optional[dict] = None,
) -> dict:
    """Log the share of ``<unk>`` tokens of each split in ``data_dir`` (named ``shown_as``); above
    :data:`UNKNOWN_WARNING` % as a warning with its cause and fix (:func:`unknown_cause`, given
    the ``tokenizer`` and ``texts`` = {split: raw text file}; without them the cause is told
    from preprocess.log's share of symbols missing from dict.txt). Returns {split: %}."""
    rates = {}
    for split in ("train", "valid", "test"):
        prefix = Path(data_dir) / split
        if not Path(f"{prefix}.idx").is_file():
            continue
        n_unk, n = unknown_rate(prefix)
        pct = rates[split] = 100.0 * n_unk / max(n, 1)
        where = f"{Path(shown_as) / split}: {n_unk} of {n} tokens ({pct:.3g}%) are <unk>"
        if pct <= UNKNOWN_WARNING:
            logger.info(where)
            continue
        from fairseq.data import Dictionary

        d = Dictionary.load(str(Path(data_dir) / "dict.txt"))
        if tokenizer is not None and texts and split in texts:
            with open(texts[split], encoding="utf-8") as f:
                cause = unknown_cause(d, tokenizer, (line.rstrip("\n") for line in f))
        else:
            missing = _replaced_share(Path(data_dir) / "preprocess.log", split)
            cause = (
                "most are symbols missing from dict.txt: "
                + _MISMATCH.format(dict_path=Path(shown_as) / "dict.txt")
                if missing is not None and missing >= pct / 2
                else "most are the tokenizer's own <unk>: " + _UNCOVERED
            )
        logger.warning(f"{where}: {cause}")
    return rates


_CASING = (
    "the text is cased and the vocabulary is not ({lower:.3g}% <unk> once lower-cased, against "
    "{as_is:.3g}%): check --lowercase (yes for WordPiece) or lower-case the text, or use the "
    "cased vocabulary of the model"
)
_MISMATCH = (
    "the dictionary {dict_path} does not match the tokenizer's vocabulary (a dict.txt of another "
    "tokenizer or model): binarize with the dict.txt written for this tokenizer (leave --dict "
    "out to build one from the text), or give the tokenizer files that dict.txt was made with"
)
_UNCOVERED = (
    "the tokenizer's vocabulary does not cover this text (another language or script, or a "
    "model trained on other text): train a tokenizer on it (sentencepiece without --spm-model) "
    "or choose one made for it"
)


def unknown_cause(dictionary, tokenizer, texts: Iterable[str], sample: int = 2000) -> str:
    """Why the ``texts`` (a sample of ``sample`` non-empty ones) become many ``<unk>`` with this
    tokenizer and fairseq ``dictionary``, and the fix, told apart by measuring:

    * casing: lower-casing the text halves the <unk> share or better (a cased text with an
      uncased vocabulary);
    * a vocabulary mismatch: most <unk> are symbols the tokenizer produced that ``dict.txt``
      lacks, or a tenth of dict.txt's entries are unknown to the tokenizer (the dictionary of
      another tokenizer); for whitespace words: words outside a dictionary cut by --vocab-size;
    * otherwise: text the tokenizer's own vocabulary does not cover (its own <unk>)."""
    import itertools

    from truneg_fairseq.text import UNKNOWN

    sample_texts = list(itertools.islice((t for t in texts if t.strip()), sample))
    unk, unk_word = dictionary.unk(), dictionary.unk_word

    def shares(lines):
        own = missing = n = 0
        for pieces in tokenizer.encode_lines(lines):
            for p in pieces.split():
                n += 1
                if p == unk_word:
                    own += 1
                elif dictionary.index(p) == unk:
                    missing += 1
        return 100.0 * own / max(n, 1), 100.0 * missing / max(n, 1)

    own, missing = shares(sample_texts)
    lower = sum(shares([t.lower() for t in sample_texts]))
    as_is = own + missing
    if as_is > 0 and lower <= as_is / 2:
        return _CASING.format(lower=lower, as_is=as_is)
    symbols = dictionary.symbols[dictionary.nspecial :]
    foreign = sum(1 for s in symbols if tokenizer.classify(s)[0] == UNKNOWN)
    if tokenizer.kind == "whitespace" and missing >= own:
        return (
            f"{missing:.3g}% of the words are not among the {len(symbols)} of dict.txt: a larger "
            "--vocab-size (or a subword tokenizer, such as sentencepiece), or the dict.txt of this text"
        )
    if missing >= own or foreign >= 0.1 * max(len(symbols), 1):
        return (
            f"{missing:.3g}% of the symbols are not in dict.txt and {foreign} of its "
            f"{len(symbols)} entries are unknown to the tokenizer: "
            + _MISMATCH.format(dict_path="dict.txt")
        )
    return f"{own:.3g}% of the symbols are the tokenizer's own <unk>: " + _UNCOVERED


def _replaced_share(log_path: Path, split: str) -> Optional[float]:
    """fairseq-preprocess's "% replaced" (symbols missing from dict.txt) of ``split``."""
    if not log_path.is_file():
        return None
    for line in log_path.read_text(encoding="utf-8").splitlines():
        m = re.search(rf"/{split}(?:\.txt)?: .*?([0-9.e+-]+)% replaced", line)
        if m:
            try:
                return float(m.group(1))
            except ValueError:
                return None
    return None
