"""The corpus pipeline: raw text -> cleaned, deduplicated, split lines -> a tokenizer
(sentencepiece trained on the text or given, WordPiece, GPT-2 BPE, whitespace) -> the tokenized
text -> a fairseq data-bin (``dict.txt`` and mmap ``.bin``/``.idx``, as fairseq-preprocess writes
them), configured by :class:`CorpusConfig` and run by :func:`prepare_corpus`
(``scripts/prepare_corpus.py`` is its command line).

The text is read, de-duplicated and split as a stream (:mod:`truneg_fairseq.data.corpus_split`):
the command's memory does not grow with the corpus. The split text (``raw/``) and the tokenized
text (``tok/``) are intermediates, removed once the data-bin is written unless
``keep_intermediates`` (``--keep-intermediates``).

Everything is built in a staging directory inside the output directory and moved in as one set
at the end (:func:`truneg_fairseq.outputs.staged_entries`): a failed, interrupted or killed run
leaves the earlier outputs as they were. Tokenizing and binarizing run over ``workers``
processes (:mod:`truneg_fairseq.pipelines.corpus_parallel`), sentencepiece training in a child
process; every child ends with the command (:mod:`truneg_fairseq.pipelines.children`). Each
stage logs its progress at most every ``progress_every`` seconds, and its time when it ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.outputs import OutputDirError, check_entries, output_lock, staged_entries
from truneg_fairseq.pipelines import corpus_parallel as par
from truneg_fairseq.pipelines.children import children_end_with_us
from truneg_fairseq.text import TokenizerSpec

OWNER = "prepare_corpus.py"
OUTPUTS = ("raw", "spm.model", "spm.vocab", "tok", "data-bin")
BINARIZERS = ("fast", "fairseq-preprocess")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass
class CorpusConfig:
    """What :func:`prepare_corpus` builds; the fields are the flags of ``prepare_corpus.py``."""

    output_dir: str
    inputs: List[str] = field(default_factory=list)  # --input FILE...
    wordnet_glosses: bool = False  # the built-in corpus instead
    wordnet_headwords: bool = False  # its definitions start with the synset's words
    tokenizer: TokenizerSpec = field(default_factory=lambda: TokenizerSpec("sentencepiece"))
    dict: Optional[str] = None  # --dict (--srcdict): binarize with this dict.txt
    vocab_size: Optional[int] = None  # sentencepiece trained (8000) / whitespace words kept
    model_type: str = "unigram"  # sentencepiece trained: unigram or bpe
    spm_sample_lines: int = 300_000  # lines sentencepiece is trained on (a seeded sample)
    valid_fraction: float = 0.02
    max_lines: int = 0  # 0: all
    seed: int = 1
    workers: Optional[int] = None  # processes for tokenizing and binarizing (None: every core)
    binarizer: str = "fast"  # or fairseq-preprocess (same files, ~10x the CPU time)
    progress_every: float = 5.0  # seconds between progress lines of a stage
    keep_intermediates: bool = False  # keep raw/ and tok/ beside the data-bin
    shards: int = 1  # the training split in this many shards (pipelines/corpus_shards.py)

    def check(self) -> None:
        """One :class:`CorpusError` naming the flag for a setting that cannot run."""
        if bool(self.inputs) == bool(self.wordnet_glosses):
            raise CorpusError("give either --input FILE... or --wordnet-glosses")
        if self.wordnet_headwords and not self.wordnet_glosses:
            raise CorpusError(
                "--wordnet-headwords goes with --wordnet-glosses (the built-in corpus), not with --input"
            )
        if self.dict and not os.path.isfile(self.dict):
            raise CorpusError(f"--dict {self.dict} not found")
        if self.workers is not None and self.workers < 1:
            raise CorpusError(f"--workers {self.workers}: give 1 or more (default: every core)")
        if self.binarizer not in BINARIZERS:
            raise CorpusError(f"--binarizer {self.binarizer}: one of {', '.join(BINARIZERS)}")
        if not 0 < self.valid_fraction < 1:
            raise CorpusError(f"--valid-fraction {self.valid_fraction}: give a share in (0, 1)")
        if self.shards < 1 or (self.shards > 1 and self.binarizer != "fast"):
            raise CorpusError(
                f"--shards {self.shards}: give 1 or more, with --binarizer fast (the default)"
            )
        if self.spm_sample_lines < 1:
            raise CorpusError(f"--spm-sample-lines {self.spm_sample_lines}: give 1 or more")

    @property
    def n_workers(self) -> int:
        return self.workers or available_cores()


def command_line(cfg: CorpusConfig) -> List[str]:
    """The ``truneg-prepare-corpus`` command line that builds the same outputs."""
    d, t = CorpusConfig(output_dir=""), cfg.tokenizer
    cmd = ["truneg-prepare-corpus"]
    cmd += ["--input", *cfg.inputs] if cfg.inputs else ["--wordnet-glosses"]
    cmd += ["--wordnet-headwords"] if cfg.wordnet_headwords else []
    cmd += ["--output-dir", cfg.output_dir, "--tokenizer", t.kind]
    for flag, value in (
        ("--spm-model", t.spm_model),
        ("--gpt2-encoder-json", t.gpt2_encoder_json),
        ("--gpt2-vocab-bpe", t.gpt2_vocab_bpe),
        ("--vocab", t.vocab),
        ("--dict", cfg.dict),
        ("--vocab-size", cfg.vocab_size),
        ("--workers", cfg.workers),
    ):
        cmd += [flag, str(value)] if value is not None else []
    if t.lowercase is not None:
        cmd += ["--lowercase", "yes" if t.lowercase else "no"]
    cmd += ["--keep-intermediates"] if cfg.keep_intermediates else []
    for name in (
        "model_type",
        "spm_sample_lines",
        "valid_fraction",
        "max_lines",
        "seed",
        "binarizer",
        "progress_every",
        "shards",
    ):
        if getattr(cfg, name) != getattr(d, name):
            cmd += ["--" + name.replace("_", "-"), str(getattr(cfg, name))]
    return cmd


def prepare_corpus(
    cfg: CorpusConfig,
    log: Optional[logging.Logger] = None,
    on_stage: Optional[Callable[[str, str], None]] = None,
) -> Path:
    """Build ``spm.*`` (a trained sentencepiece model) and ``data-bin/`` under
    ``cfg.output_dir`` (and ``raw/`` and ``tok/`` with ``cfg.keep_intermediates``); returns the
    data-bin. ``on_stage(name, "start"|"end")`` is called
    around each stage (read, split, train-sentencepiece, encode, binarize). Raises
    :class:`CorpusError` / :class:`OutputDirError` with a one-line message naming the file or
    flag and the fix."""
    log = log or logging.getLogger("truneg_fairseq.prepare_corpus")
    cfg.check()
    run = _Run(cfg, log, on_stage)
    try:
        with children_end_with_us(), output_lock(cfg.output_dir, log.warning):
            return run.prepare()
    except (CorpusError, OutputDirError) as e:  # name the output directory, not the staging one
        raise type(e)(re.sub(rf"/\.{re.escape(OWNER)}\.new-\d+", "", str(e))) from None


class _Run:
    def __init__(self, cfg: CorpusConfig, log: logging.Logger, on_stage):
        self.cfg, self.log, self.on_stage = cfg, log, on_stage or (lambda name, when: None)

    @contextlib.contextmanager
    def stage(self, name: str):
        self.on_stage(name, "start")
        t0 = time.time()
        yield
        self.log.info(f"{name}: done in {time.time() - t0:.1f} s")
        self.on_stage(name, "end")

    def prepare(self) -> Path:
        from truneg_fairseq.text import build_tokenizer, wordpiece_dict_lines

        cfg = self.cfg
        spec = cfg.tokenizer
        train_spm = spec.kind == "sentencepiece" and not spec.spm_model
        tokenizer = None if train_spm else build_tokenizer(spec)  # checked before any writing
        lines_wp = wordpiece_dict_lines(spec.vocab) if spec.kind == "wordpiece" else None
        if lines_wp and cfg.dict:
            _check_wordpiece_dict(cfg.dict, lines_wp, spec.vocab)
        # a file of the user's where this run would write: one error now, not after the work
        check_entries(cfg.output_dir, OWNER, self.expected_files(train_spm), self.inputs())
        for path in cfg.inputs:  # every input checked before the first is read
            if not os.path.isfile(path):
                raise CorpusError(f"--input {path} not found")
        with staged_entries(
            cfg.output_dir, OWNER, OUTPUTS, self.log.warning, inputs=self.inputs()
        ) as stage:
            self.build(Path(stage), tokenizer, lines_wp)
        dest = os.path.join(cfg.output_dir, "data-bin")
        self.log.info(f"binarized data in {dest} (dictionary {os.path.join(dest, 'dict.txt')})")
        if cfg.shards > 1:
            from truneg_fairseq.pipelines.corpus_shards import data_arg

            self.log.info(
                f"the training split in {cfg.shards} shards, one an epoch: give fairseq-train "
                f"{data_arg(dest, cfg.shards)}"
            )
        return Path(dest)

    def expected_files(self, train_spm: bool) -> List[str]:
        """The files every run writes (a run may write more: shards, logs)."""
        splits = ("train", "valid")
        kept = ("raw", "tok") if self.cfg.keep_intermediates else ()
        names = [f"{d}/{s}.txt" for d in kept for s in splits]
        names += ["data-bin/dict.txt"] + [
            f"data-bin/{s}.{x}" for s in splits for x in ("bin", "idx")
        ]
        return names + (["spm.model", "spm.vocab"] if train_spm else [])

    def inputs(self) -> dict:
        """The files this run reads, by flag: they stay where they are even inside the output."""
        spec = self.cfg.tokenizer
        inputs = {f"--input {p}": p for p in self.cfg.inputs}
        if self.cfg.dict:
            inputs["--dict"] = self.cfg.dict
        for attr, path in spec.files().items():
            inputs["--" + attr.replace("_", "-")] = path
        return inputs

    def read(self, split) -> None:
        """Feed the corpus to ``split`` (:class:`ExternalSplit`), one line at a time: each
        input's lines with their whitespace runs made one space, the empty ones counted and
        left out, up to ``max_lines`` lines (the rest is not read)."""
        from truneg_fairseq.data import corpus_steps

        cfg, log = self.cfg, self.log
        if cfg.wordnet_glosses:
            split.feed(
                corpus_steps.wordnet_gloss_lines(headwords=cfg.wordnet_headwords), cfg.max_lines
            )
            heads = " with their headwords" if cfg.wordnet_headwords else ""
            cut = f" (--max-lines {cfg.max_lines})" if split.lines == cfg.max_lines else ""
            log.info(f"WordNet glosses{heads}: {split.lines} lines{cut}")
            return
        empty = 0

        def non_empty():
            nonlocal empty
            for path in cfg.inputs:
                for raw in corpus_steps.read_text_lines(path):
                    line = " ".join(raw.split())
                    if line:
                        yield line
                    else:
                        empty += 1

        with par.Progress(log, cfg.progress_every, lambda: f"read: {split.lines:,} lines"):
            split.feed(non_empty(), cfg.max_lines)
        rest = (
            f"; stopped at --max-lines {cfg.max_lines}, the rest not read"
            if cfg.max_lines and split.lines == cfg.max_lines
            else ""
        )
        log.info(
            f"read {split.lines} non-empty lines from {len(cfg.inputs)} file(s) ({empty} empty "
            f"lines skipped{rest})"
        )
        if not split.lines:
            raise CorpusError(
                f"--input {' '.join(cfg.inputs)}: no text (all lines empty); give a corpus with one "
                "sentence per line"
            )

    def build(self, stage: Path, tokenizer, lines_wp) -> None:
        """raw/, spm.*, tok/ and data-bin/ under ``stage``; raw/ and tok/ removed at the end
        unless ``keep_intermediates``."""
        from truneg_fairseq.data import corpus_steps
        from truneg_fairseq.data.corpus_split import ExternalSplit
        from truneg_fairseq.text import build_tokenizer, write_record

        cfg, log = self.cfg, self.log
        hint = sum(corpus_steps.text_size_hint(p) for p in cfg.inputs) or 16 << 20
        with ExternalSplit(stage, size_hint=hint) as split:
            with self.stage("read"):
                self.read(split)
            with (
                self.stage("split"),
                par.Progress(log, cfg.progress_every, lambda: f"split: {split.status()}"),
            ):
                train, valid, n_train, n_valid = split.finish(
                    stage / "raw", cfg.valid_fraction, cfg.seed
                )
                log.info(
                    f"split: {n_train} train, {n_valid} valid lines (duplicates removed: "
                    f"{split.duplicates})"
                )
        spec = cfg.tokenizer
        if tokenizer is None:
            with self.stage("train-sentencepiece"):
                with par.heartbeat(log, cfg.progress_every, "train sentencepiece"):
                    model = corpus_steps.train_sentencepiece(
                        train,
                        stage / "spm",
                        cfg.vocab_size or 8000,
                        cfg.model_type,
                        cfg.spm_sample_lines,
                        in_child=True,
                        seed=cfg.seed,
                    )
            log.info(f"sentencepiece model {os.path.join(cfg.output_dir, model.name)}")
            spec = TokenizerSpec("sentencepiece", spm_model=str(model))
            tokenizer = build_tokenizer(spec)
        n = cfg.n_workers
        with self.stage("encode"):
            enc = {
                split: par.encode_split(
                    spec, path, stage / "tok" / f"{split}.txt", n, log, cfg.progress_every, split
                )
                for split, path in (("train", train), ("valid", valid))
            }
        srcdict = cfg.dict
        if lines_wp and not srcdict:
            srcdict = stage / "tok" / "dict.txt"
            corpus_steps.atomic_write_lines(srcdict, lines_wp)
        nwords = cfg.vocab_size if spec.kind == "whitespace" and cfg.vocab_size else -1
        shown = Path(cfg.output_dir) / "data-bin"
        with self.stage("binarize"):
            if cfg.binarizer == "fast":
                dest = self.binarize_fast(stage, enc, srcdict, nwords)
            else:
                dest = self.binarize_fairseq(stage, enc, srcdict, nwords)
        write_record(dest, tokenizer, moved_from=stage, moved_to=cfg.output_dir)
        _log_unknown_rates(dest, log, stage, cfg.output_dir)
        corpus_steps.report_unknown_rates(
            dest, shown, tokenizer=tokenizer, texts={"train": train, "valid": valid}
        )
        log.info(f"{spec.kind} tokenizer fingerprint {tokenizer.fingerprint()[:12]}")
        if not cfg.keep_intermediates:
            self.remove_intermediates(stage)

    def remove_intermediates(self, stage: Path) -> None:
        """raw/ and tok/ go once the data-bin is written: the data-bin is what training reads,
        and the two would more than double the disk the output takes."""
        parts = [stage / "raw", stage / "tok"]
        size = sum(f.stat().st_size for d in parts for f in d.rglob("*") if f.is_file())
        for d in parts:
            shutil.rmtree(d, ignore_errors=True)
        self.log.info(
            f"removed the intermediates raw/ and tok/ ({size / 2**20:.1f} MiB: the split text "
            "and the tokenized text); --keep-intermediates keeps them"
        )

    def binarize_fast(self, stage: Path, enc: dict, srcdict, nwords: int) -> Path:
        """What fairseq-preprocess --only-source writes (:mod:`corpus_parallel`), and its log."""
        from fairseq.data import Dictionary

        cfg = self.cfg
        dest = stage / "data-bin"
        dest.mkdir(parents=True, exist_ok=True)
        d = (
            Dictionary.load(str(srcdict))
            if srcdict
            else par.build_dictionary(enc["train"].counts, nwords)
        )
        d.save(str(dest / "dict.txt"))
        log_lines = [
            "binarized by truneg_fairseq.pipelines.corpus as fairseq-preprocess --only-source "
            f"--dataset-impl mmap --workers {cfg.n_workers}"
            + (
                f" --srcdict {srcdict}"
                if srcdict
                else f" --nwordssrc {nwords}"
                if nwords > 0
                else ""
            ),
            f"Dictionary: {len(d)} types",
        ]
        for split, e in enc.items():
            summary = par.binarize_split(
                dest / "dict.txt",
                e,
                dest / split,
                cfg.n_workers,
                self.log,
                cfg.progress_every,
                split,
                len(d),
                shards=cfg.shards if split == "train" else 1,
            )
            shown = Path(cfg.output_dir) / "tok" / f"{split}.txt"
            log_lines.append(f"{shown}: {summary} (by {d.unk_word})")
        log_lines.append(f"Wrote preprocessed data to {Path(cfg.output_dir) / 'data-bin'}")
        with open(dest / "preprocess.log", "w", encoding="utf-8") as f:
            f.write("\n".join(log_lines) + "\n")
        return dest

    def binarize_fairseq(self, stage: Path, enc: dict, srcdict, nwords: int) -> Path:
        """fairseq-preprocess itself, in this process with ``workers`` (its pools end with us)."""
        from truneg_fairseq.data import corpus_steps

        cfg = self.cfg
        total = sum(e.lines + e.symbols for e in enc.values())
        itemsize = 2 if len(enc["train"].counts) < 65000 else 4

        def message():
            done = sum(p.stat().st_size for p in stage.glob(".data-bin.new-*/*.bin")) // itemsize
            return f"binarize (fairseq-preprocess): about {min(done, total):,} of {total:,} tokens"

        tok = stage / "tok"
        with (
            par.Progress(self.log, cfg.progress_every, message),
            corpus_steps.without_commas(tok / "train.txt", tok / "valid.txt") as (train, valid),
        ):
            return corpus_steps.binarize(
                train,
                valid,
                stage / "data-bin",
                workers=cfg.n_workers,
                srcdict=srcdict,
                nwords=nwords,
                name_as=Path(cfg.output_dir) / "data-bin",
            )


def _log_unknown_rates(dest, log, stage, out):
    """Repeat the binarizer's per-split <unk> rates (its preprocess.log in data-bin/)."""
    path = os.path.join(dest, "preprocess.log")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "replaced by <unk>" in line or "replaced (by" in line:
                    # fairseq-preprocess names the language of --only-source data "None"
                    text = line.split(" | ")[-1].strip().removeprefix("[None] ")
                    log.info(text.replace(str(stage), str(out)))


def _check_wordpiece_dict(srcdict, lines, vocab):
    """--dict must list the vocabulary's entries in its order, or ids would not match the model."""
    with open(srcdict, encoding="utf-8") as f:
        given = [line.rstrip("\r\n").rsplit(" ", 1)[0] for line in f if line.strip()]
    want = [line.rsplit(" ", 1)[0] for line in lines]
    if given != want:
        at = next(
            (i for i, (a, b) in enumerate(zip(given, want)) if a != b), min(len(given), len(want))
        )
        raise CorpusError(
            f"--dict {srcdict} is not the dictionary of --vocab {vocab} ({len(given)} vs {len(want)} entries, "
            f"first difference at line {at + 1}); give the dict.txt written with that vocabulary "
            "(convert_hf.py import), or leave --dict out"
        )
