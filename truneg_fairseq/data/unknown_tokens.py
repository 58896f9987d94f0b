"""The share of ``<unk>`` in binarized data, and why it is high: casing, a dictionary of
another tokenizer, or text the tokenizer does not cover (:func:`unknown_cause`), each with its
fix. Used by the corpus pipeline and ``--task squad``."""

from __future__ import annotations

import itertools
import logging
import os
import re
from pathlib import Path
from typing import Iterable, Optional, Tuple

logger = logging.getLogger("truneg_fairseq.data.corpus_steps")


UNKNOWN_WARNING = (
    5.0  # % of tokens that are <unk> above which the tokenizer or vocabulary is suspect
)


def unknown_rate(prefix: os.PathLike, unk: int = 3) -> Tuple[int, int]:
    """(``<unk>`` tokens, tokens) of a binarized split (``prefix``.bin/.idx): both the words
    fairseq-preprocess did not find in dict.txt and the tokenizer's own unknown pieces. The
    ``.bin`` is read a chunk at a time: a paper-size split is billions of tokens, and a mask
    over all of them at once would be as many bytes of memory."""
    import numpy as np
    from fairseq.data import indexed_dataset

    dtype = indexed_dataset.MMapIndexedDataset.Index(f"{prefix}.idx").dtype
    n_unk = n = 0
    with open(f"{prefix}.bin", "rb") as f:
        while True:
            tokens = np.fromfile(f, dtype=dtype, count=1 << 22)
            if not tokens.size:
                break
            n_unk += int(np.count_nonzero(tokens == unk))
            n += int(tokens.size)
    return n_unk, n


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
