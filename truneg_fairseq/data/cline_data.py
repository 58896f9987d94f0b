"""CLINE (Wang et al., ACL 2021): WordNet-built positives and semantic negatives, and "Hits".

Example construction (:func:`make_cline_data`, CLI ``scripts/make_cline_data.py``)
---------------------------------------------------------------------------------------------
Each input line is one sentence x_ori, split on whitespace into words. A word is *eligible* when
its alphabetic core (punctuation around it is kept, see :func:`lexicon.replace.split_token`) is
not a stopword and WordNet gives it a part of speech (:class:`lexicon.replace.Lexicon`: noun,
verb, adjective or adverb, decided from WordNet's morphology and sense frequencies, no tagger).

* x_syn: ``max(1, round(syn_rate * E))`` of the E eligible words (in a seeded random order,
  skipping words with no candidate) are replaced by a word of the same part of speech: one of
  its single-word WordNet synonyms, hypernyms, or morphological variants (other inflections of
  the same base form seen in the training text, e.g. "cars" -> "car"); the kind is drawn
  uniformly among those the word has. An inflected word ("ran", "cars") gets variants only:
  WordNet's synonyms are base forms and would break the agreement of the sentence.
* x_ant: ``max(1, round(ant_rate * E))`` eligible words are replaced by a single-word WordNet
  antonym of the same part of speech, or, when the word has none, by a random word of the same
  part of speech from the training text's vocabulary (never the word itself or one of its
  synonym candidates).

A sentence with no eligible word is kept (its MLM and replaced-token-detection terms still
train) with x_syn = x_ant = x_ori; the task gives it no contrastive term (its x_ant is not a
negative). Such sentences are counted in the summary as ``no_eligible``.

Every draw comes from ``random.Random(f"{seed}:{split}:{line}")``, so the output does not depend
on ``--workers``. Words are tokenized one by one (sentencepiece and GPT-2 BPE never merge across
whitespace, so this equals tokenizing the line), which gives each piece its character span:
a piece is labelled *replaced* (1) when it overlaps the replaced alphabetic core of its word.

Output (``OUT/data-bin``, built atomically): ``dict.txt``; per split ``{split}.ori``,
``{split}.syn``, ``{split}.ant`` (token ids, ``</s>`` appended, fairseq mmap format) and
``{split}.syn_label``, ``{split}.ant_label`` (uint8, one label per token, 0 for ``</s>``);
``cline_meta.json`` (the dictionary's fingerprint, the settings, the summary). The tokenized
text is kept under ``OUT/tok`` and the summary in ``OUT/cline_summary.json``.

The sentence-level construction lives in :mod:`truneg_fairseq.data.cline_triples` and the
piece encoder in :mod:`truneg_fairseq.text.pieces`; their names are importable from here too.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import random
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from truneg_fairseq.data.cline_triples import (  # noqa: F401  (the module's public names, kept here)
    ANT_RATE,
    SYN_RATE,
    CorpusVocabulary,
    Triple,
    build_triple,
    collect_vocabulary,
    make_hits_triplets,
)
from truneg_fairseq.data.corpus_steps import read_text_lines
from truneg_fairseq.errors import ClineDataError, CorpusError
from truneg_fairseq.lexicon.replace import Lexicon
from truneg_fairseq.outputs import atomic_dir, atomic_open
from truneg_fairseq.text.pieces import PIECE_KINDS, PieceEncoder
from truneg_fairseq.text.spec import SP_SPACE, TokenizerSpec  # noqa: F401

logger = logging.getLogger(__name__)

# the five files of one split, written here and read by ``--task cline`` (tasks/cline.py)
SPLIT_FILES = ("ori", "syn", "ant", "syn_label", "ant_label")
META_FILE = "cline_meta.json"
META_VERSION = 1
TOKENIZERS = PIECE_KINDS  # what --tokenizer accepts for CLINE data


# ---- the corpus -------------------------------------------------------------------------------


@dataclass
class Settings:
    seed: int = 1
    syn_rate: float = SYN_RATE
    ant_rate: float = ANT_RATE
    tokenizer: TokenizerSpec = field(default_factory=lambda: TokenizerSpec("sentencepiece"))


_WORKER: dict = {}


def _init_worker(settings: Settings, vocab: CorpusVocabulary, wn=None) -> None:
    """Per-process state. A forked worker opens its own WordNet reader: nltk's reader keeps its
    data files open and seeks in them, so a handle shared with the parent gives garbage."""
    from truneg_fairseq.lexicon import load_wordnet

    if wn is None:
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        warnings.filterwarnings("ignore", message="The multilingual functions are not available")
        wn = WordNetCorpusReader(load_wordnet().root, None)
    _WORKER["settings"] = settings
    _WORKER["vocab"] = vocab
    _WORKER["lex"] = Lexicon(wn)
    _WORKER["encoder"] = PieceEncoder(settings.tokenizer)


def _process_chunk(job: Tuple[str, int, List[str]]) -> List[tuple]:
    split, start, lines = job
    st: Settings = _WORKER["settings"]
    enc: PieceEncoder = _WORKER["encoder"]
    out = []
    for k, line in enumerate(lines):
        rng = random.Random(f"{st.seed}:{split}:{start + k}")
        t = build_triple(line, _WORKER["lex"], _WORKER["vocab"], rng, st.syn_rate, st.ant_rate)
        ori, _ = enc.tokens_and_labels(t.ori, [None] * len(t.ori))
        syn, syn_lab = enc.tokens_and_labels(t.syn, t.syn_cores)
        ant, ant_lab = enc.tokens_and_labels(t.ant, t.ant_cores)
        stats = (t.eligible, len(t.syn_edits), len(t.ant_edits), t.ant_antonyms, t.ant_random)
        out.append((ori, syn, syn_lab, ant, ant_lab, stats, t.syn_kinds))
    return out


def _chunks(split: str, lines: List[str], size: int) -> Iterator[Tuple[str, int, List[str]]]:
    for s in range(0, len(lines), size):
        yield split, s, lines[s : s + size]


def read_sentences(path: os.PathLike) -> Tuple[List[str], int]:
    """Non-empty lines of a text file with whitespace normalised; returns (lines, empty lines)."""
    try:
        raw = [" ".join(line.split()) for line in read_text_lines(path)]
    except CorpusError as e:
        raise ClineDataError(str(e)) from None
    lines = [line for line in raw if line]
    return lines, len(raw) - len(lines)


def _summary(counts: Counter, kinds: Counter) -> dict:
    sents, elig = counts["sentences"], counts["eligible_words"]
    with_neg = sents - counts["no_eligible"]
    return {
        "sentences": sents,
        "empty_lines_skipped": counts["empty_lines"],
        "eligible_words": elig,
        "eligible_per_sentence": round(elig / max(sents, 1), 3),
        "no_eligible": counts["no_eligible"],
        "no_eligible_share": round(counts["no_eligible"] / max(sents, 1), 4),
        "syn_replaced": counts["syn_replaced"],
        "syn_rate": round(counts["syn_replaced"] / max(elig, 1), 4),
        "syn_kinds": dict(sorted(kinds.items())),
        "syn_unchanged_sentences": counts["syn_unchanged"],
        "ant_replaced": counts["ant_replaced"],
        "ant_rate": round(counts["ant_replaced"] / max(elig, 1), 4),
        "ant_antonyms": counts["ant_antonyms"],
        "ant_random": counts["ant_random"],
        "without_antonym_share": round(counts["without_antonym"] / max(with_neg, 1), 4),
        "tokens": counts["tokens"],
        "unknown_tokens": counts["unk"],
    }


def _binarize(lines: Iterable[Sequence[int]], prefix: Path, dtype) -> List[int]:
    import torch
    from fairseq.data import indexed_dataset

    builder = indexed_dataset.MMapIndexedDatasetBuilder(str(prefix) + ".bin", dtype=dtype)
    sizes = []
    for ids in lines:
        builder.add_item(torch.as_tensor(np.asarray(ids, dtype=np.int64)))
        sizes.append(len(ids))
    builder.finalize(str(prefix) + ".idx")
    return sizes


def _read_tok(path: Path) -> Iterator[List[str]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.split()


def _build_split(split, lines, n_empty, tok_dir, pool, chunk_size, log_every):
    """Write the tokens and labels of one split under ``tok_dir``; returns (counts, kinds)."""
    counts, kinds = Counter(sentences=0, empty_lines=n_empty), Counter()
    paths = {n: tok_dir / f"{split}.{n}" for n in SPLIT_FILES}
    t0 = time.time()
    jobs = _chunks(split, lines, chunk_size)
    results = pool.imap(_process_chunk, jobs) if pool is not None else map(_process_chunk, jobs)
    with (
        atomic_open(paths["ori"], "w", encoding="utf-8") as f_ori,
        atomic_open(paths["syn"], "w", encoding="utf-8") as f_syn,
        atomic_open(paths["ant"], "w", encoding="utf-8") as f_ant,
        atomic_open(paths["syn_label"], "w", encoding="utf-8") as f_sl,
        atomic_open(paths["ant_label"], "w", encoding="utf-8") as f_al,
    ):
        for chunk in results:
            for ori, syn, syn_lab, ant, ant_lab, stats, syn_kinds in chunk:
                f_ori.write(" ".join(ori) + "\n")
                f_syn.write(" ".join(syn) + "\n")
                f_ant.write(" ".join(ant) + "\n")
                f_sl.write(" ".join(map(str, syn_lab)) + "\n")
                f_al.write(" ".join(map(str, ant_lab)) + "\n")
                elig, n_syn, n_ant, n_antonym, n_random = stats
                counts["sentences"] += 1
                counts["eligible_words"] += elig
                counts["no_eligible"] += int(elig == 0)
                counts["syn_replaced"] += n_syn
                counts["syn_unchanged"] += int(n_syn == 0)
                counts["ant_replaced"] += n_ant
                counts["ant_antonyms"] += n_antonym
                counts["ant_random"] += n_random
                counts["without_antonym"] += int(elig > 0 and n_antonym == 0)
                counts["tokens"] += len(ori)
                kinds.update(syn_kinds)
                if counts["sentences"] % log_every == 0:
                    n = counts["sentences"]
                    logger.info(
                        f"{split}: {n}/{len(lines)} sentences ({n / (time.time() - t0):.0f}/s)"
                    )
    logger.info(f"{split}: built {counts['sentences']} triples in {time.time() - t0:.1f}s")
    return counts, kinds


def _read_inputs(splits: Dict[str, os.PathLike], settings: Settings, srcdict) -> Tuple[dict, dict]:
    """Check the settings and files; (sentences per split, empty lines per split)."""
    if "train" not in splits:
        raise ClineDataError(
            "a train split is needed (its words are the random replacements of x_ant)"
        )
    for name, rate in (("--syn-rate", settings.syn_rate), ("--ant-rate", settings.ant_rate)):
        if not 0.0 < rate <= 1.0:
            raise ClineDataError(f"{name} {rate}: give a share of the eligible words in (0, 1]")
    if srcdict is not None and not Path(srcdict).is_file():
        raise ClineDataError(
            f"--srcdict {srcdict} not found (the dict.txt of the model to continue)"
        )
    PieceEncoder(settings.tokenizer)  # checks files
    texts, empty = {}, {}
    for split, path in splits.items():
        texts[split], empty[split] = read_sentences(path)
        if not texts[split]:
            raise ClineDataError(
                f"{path} ({split}): no text (all lines empty); give one sentence per line"
            )
        logger.info(
            f"{split}: {len(texts[split])} sentences from {path} ({empty[split]} empty lines skipped)"
        )
    return texts, empty


def _tokenize_splits(
    texts,
    empty,
    settings: Settings,
    vocab: CorpusVocabulary,
    wn,
    tok_dir: Path,
    workers: int,
    chunk_size: int,
    log_every: int,
) -> dict:
    """Build and tokenize every split's triples into ``tok_dir``; {split: (counts, kinds)}."""
    pool = None
    if workers > 1:
        ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
        pool = ctx.Pool(workers, initializer=_init_worker, initargs=(settings, vocab))
    else:
        _init_worker(settings, vocab, wn)
    try:
        return {
            split: _build_split(split, lines, empty[split], tok_dir, pool, chunk_size, log_every)
            for split, lines in texts.items()
        }
    finally:
        if pool is not None:
            pool.terminate()


def _dictionary(srcdict, tok_dir: Path):
    """The model's dict.txt when given, else one built from the training triples' symbols."""
    from fairseq.data import Dictionary

    if srcdict is not None:
        return Dictionary.load(str(srcdict))
    dictionary = Dictionary()
    for n in ("ori", "syn", "ant"):
        for toks in _read_tok(tok_dir / f"train.{n}"):
            for s in toks:
                dictionary.add_symbol(s)
    dictionary.finalize(padding_factor=8)
    return dictionary


def _binarize_split(split: str, dictionary, tok_dir: Path, out: Path) -> int:
    """Binarize one split's x_ori/x_syn/x_ant and their labels into ``out``; the number of
    ``<unk>`` tokens."""
    unk = 0
    sizes = {}
    for n in ("ori", "syn", "ant"):

        def ids(n=n):
            nonlocal unk
            for toks in _read_tok(tok_dir / f"{split}.{n}"):
                t = dictionary.encode_line(" ".join(toks), add_if_not_exist=False, append_eos=True)
                unk += int((t == dictionary.unk()).sum())
                yield t.tolist()

        sizes[n] = _binarize(
            ids(), out / f"{split}.{n}", np.uint16 if len(dictionary) < 65500 else np.int32
        )
    for n in ("syn_label", "ant_label"):
        labels = ([int(x) for x in toks] + [0] for toks in _read_tok(tok_dir / f"{split}.{n}"))
        if _binarize(labels, out / f"{split}.{n}", np.uint8) != sizes[n[:3]]:
            raise ClineDataError(f"internal: {split}.{n} is not aligned with {split}.{n[:3]}")
    return unk


def _log_summary(split: str, s: dict) -> None:
    logger.info(
        f"{split}: {s['sentences']} sentences, {s['eligible_words']} eligible words "
        f"({s['eligible_per_sentence']}/sentence), no eligible word: {s['no_eligible']} "
        f"({100 * s['no_eligible_share']:.2f}%, kept without a negative); x_syn replaced "
        f"{100 * s['syn_rate']:.1f}% ({s['syn_kinds']}), x_ant replaced {100 * s['ant_rate']:.1f}% "
        f"({s['ant_antonyms']} antonyms, {s['ant_random']} random words; "
        f"{100 * s['without_antonym_share']:.1f}% of sentences without any antonym); "
        f"unknown tokens: {s['unknown_tokens']}"
    )


def make_cline_data(
    splits: Dict[str, os.PathLike],
    out_dir: os.PathLike,
    settings: Settings,
    srcdict: Optional[os.PathLike] = None,
    workers: int = 1,
    chunk_size: int = 500,
    log_every: int = 10000,
    wn=None,
    inputs: Optional[Dict[str, str]] = None,
) -> dict:
    """Build the aligned triples for each split (``{"train": path, "valid": path}``) under
    ``out_dir`` (see the module docstring); returns the summary (also saved and logged).
    ``inputs`` (``{flag: path}``) are never replaced by the data-bin's files."""
    from truneg_fairseq.lexicon import load_wordnet
    from truneg_fairseq.lexicon.synonyms import dictionary_fingerprint

    texts, empty = _read_inputs(splits, settings, srcdict)
    out = Path(out_dir)
    wn = wn or load_wordnet()
    t0 = time.time()
    vocab = collect_vocabulary(texts["train"], Lexicon(wn))
    logger.info(
        f"training-text vocabulary: {sum(map(len, vocab.pools.values()))} content words "
        f"({', '.join(f'{p}: {len(w)}' for p, w in sorted(vocab.pools.items()))}) in {time.time() - t0:.1f}s"
    )
    tok_dir = out / "tok"
    counts_by_split = _tokenize_splits(
        texts, empty, settings, vocab, wn, tok_dir, workers, chunk_size, log_every
    )
    dictionary = _dictionary(srcdict, tok_dir)

    summaries = {}
    with atomic_dir(out / "data-bin", "make_cline_data.py", inputs=inputs) as tmp:
        dictionary.save(str(tmp / "dict.txt"))
        for split in texts:
            counts, kinds = counts_by_split[split]
            counts["unk"] = _binarize_split(split, dictionary, tok_dir, tmp)
            summaries[split] = _summary(counts, kinds)
        meta = {
            "version": META_VERSION,
            "dictionary_fingerprint": dictionary_fingerprint(dictionary.symbols),
            "dictionary_size": len(dictionary),
            "settings": json.loads(json.dumps(asdict(settings), default=str)),
            "splits": sorted(texts),
            "summary": summaries,
        }
        with open(tmp / META_FILE, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
    with atomic_open(out / "cline_summary.json", "w", encoding="utf-8") as f:
        json.dump(summaries, f, indent=1)
        f.write("\n")
    for split, summary in summaries.items():
        _log_summary(split, summary)
    return summaries
