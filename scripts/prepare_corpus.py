#!/usr/bin/env python
"""Prepare a corpus for pre-training: raw text -> tokenizer -> fairseq data-bin.

Writes, under --output-dir:
  raw/train.txt raw/valid.txt   the text, deduplicated, shuffled and split (seeded)
  spm.model spm.vocab           a sentencepiece model trained on raw/train.txt (--tokenizer
                                sentencepiece without --spm-model; the default)
  tok/train.txt tok/valid.txt   the text as dict.txt symbols
  data-bin/                     fairseq-preprocess --only-source output (dict.txt, mmap shards)
                                and tokenizer_fingerprint.json (the tokenizer and its files'
                                sha256: build_synonym_table.py checks it, --mask-whole-words
                                finds the tokenizer there)

--tokenizer wordpiece --vocab VOCAB tokenizes with BERT's WordPiece (HF tokenizers; lower-cased
as the vocabulary's tokenizer_config.json/config.json says, else when it has no upper-case
entries) and binarizes with the dict.txt of that vocabulary (its id order after fairseq's
specials; [CLS] [SEP] [PAD] [UNK] [MASK] are <s> </s> <pad> <unk> <mask>), so ids match a model
imported with convert_hf.py (--srcdict IMPORT/dict.txt is checked to be that dictionary).
--tokenizer gpt2 writes BPE ids; --tokenizer whitespace keeps the words (with --vocab-size N,
the N most frequent words of the training text; the others become <unk>, and the <unk> rate of
each split is logged). With --srcdict the dictionary is not built from the data but taken as
given.

Input is either your own UTF-8 text files (one sentence or document per line; .gz, .bz2 and .xz
are decompressed; a binary or non-UTF-8 file is refused, naming the file and line) or, with
--wordnet-glosses, the built-in corpus: WordNet's definitions and example sentences.

Example:
  python scripts/prepare_corpus.py --wordnet-glosses --output-dir work --vocab-size 8000
  python scripts/prepare_corpus.py --input corpus/*.txt --output-dir work --vocab-size 32000
  python scripts/prepare_corpus.py --input corpus.txt --output-dir work-bert --tokenizer wordpiece \\
      --vocab imported/bert-base-uncased/vocab.txt --srcdict imported/bert-base-uncased/dict.txt
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402
from truneg_fairseq.io_utils import OutputDirError, output_lock, staged_entries  # noqa: E402
from truneg_fairseq.text import add_tokenizer_args  # noqa: E402


def get_parser():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", help="raw text files")
    src.add_argument(
        "--wordnet-glosses", action="store_true", help="use the built-in WordNet-gloss corpus"
    )
    p.add_argument(
        "--wordnet-headwords",
        action="store_true",
        help="with --wordnet-glosses: start each definition line with its synset's words, as a dictionary "
        'entry does ("chief, main, primary, principal: most important element")',
    )
    p.add_argument("--output-dir", required=True)
    add_tokenizer_args(p, default="sentencepiece")
    p.add_argument(
        "--srcdict", help="binarize with this dict.txt instead of one built from the data"
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="sentencepiece without --spm-model: size of the model trained (default 8000); "
        "--tokenizer whitespace: keep the N most frequent words of the training text, the "
        "others become <unk> (default: every word)",
    )
    p.add_argument(
        "--model-type",
        default="unigram",
        choices=["unigram", "bpe"],
        help="type of the sentencepiece model trained when --spm-model is not given",
    )
    p.add_argument("--valid-fraction", type=float, default=0.02)
    p.add_argument("--max-lines", type=int, default=0, help="keep at most this many lines (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="fairseq-preprocess workers")
    return p


def main(argv=None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.wordnet_headwords and not args.wordnet_glosses:
        parser.error(
            "--wordnet-headwords goes with --wordnet-glosses (the built-in corpus), not with --input"
        )
    log = setup_logging("truneg_fairseq.prepare_corpus")
    try:
        # one run at a time per output directory
        with output_lock(args.output_dir, log.warning):
            return _prepare(args, log)
    except OutputDirError as e:
        fail(str(e))


OUTPUTS = ("raw", "spm.model", "spm.vocab", "tok", "data-bin")


def _prepare(args, log) -> int:
    """Everything is built in a staging directory inside --output-dir and moved in as one set at
    the end: a failed or interrupted run leaves the earlier outputs as they were."""
    from truneg_fairseq.data import corpus
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer, wordpiece_dict_lines

    if args.srcdict and not os.path.isfile(args.srcdict):
        fail(f"--srcdict {args.srcdict} not found")
    try:
        train_spm = args.tokenizer == "sentencepiece" and not args.spm_model
        spec = TokenizerSpec.from_args(args)
        tokenizer = (
            None if train_spm else build_tokenizer(spec)
        )  # checked before anything is written
        lines_wp = wordpiece_dict_lines(args.vocab) if args.tokenizer == "wordpiece" else None
        if lines_wp and args.srcdict:
            _check_wordpiece_srcdict(args.srcdict, lines_wp, args.vocab)
        lines = _read_lines(args, log)
        with staged_entries(
            args.output_dir, "prepare_corpus.py", OUTPUTS, log.warning, inputs=_inputs(args)
        ) as stage:
            dest = _build(args, log, str(stage), lines, tokenizer, lines_wp)
        dest = os.path.join(args.output_dir, "data-bin")
        log.info(f"binarized data in {dest} (dictionary {os.path.join(dest, 'dict.txt')})")
    except (corpus.CorpusError, OutputDirError) as e:
        fail(
            re.sub(r"/\.prepare_corpus\.py\.new-\d+", "", str(e))
        )  # name the output directory, not the staging one
    return 0


def _inputs(args) -> dict:
    """The files this run reads, by flag: they stay where they are even inside --output-dir."""
    inputs = {f"--input {p}": p for p in args.input or []}
    for flag in ("srcdict", "spm_model", "vocab", "gpt2_encoder_json", "gpt2_vocab_bpe"):
        if getattr(args, flag, None):
            inputs["--" + flag.replace("_", "-")] = getattr(args, flag)
    return inputs


def _read_lines(args, log):
    from truneg_fairseq.data import corpus

    if args.wordnet_glosses:
        lines = list(corpus.wordnet_gloss_lines(headwords=args.wordnet_headwords))
        log.info(
            f"WordNet glosses{' with their headwords' if args.wordnet_headwords else ''}: {len(lines)} lines"
        )
    else:
        lines = []
        for path in args.input:  # checked before anything is written
            lines += [" ".join(l.split()) for l in corpus.read_text_lines(path)]
        empty = sum(1 for l in lines if not l)
        lines = [l for l in lines if l]
        log.info(
            f"read {len(lines)} non-empty lines from {len(args.input)} file(s) ({empty} empty lines skipped)"
        )
        if not lines:
            fail(
                f"--input {' '.join(args.input)}: no text (all lines empty); give a corpus with one sentence per line"
            )
    return lines[: args.max_lines] if args.max_lines else lines


def _build(args, log, stage, lines, tokenizer, lines_wp) -> str:
    """raw/, spm.*, tok/ and data-bin/ under ``stage``; returns the staged data-bin."""
    from truneg_fairseq.data import corpus
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer, write_record

    train, valid, n_train, n_valid = corpus.write_split_corpus(
        lines, os.path.join(stage, "raw"), args.valid_fraction, args.seed
    )
    log.info(
        f"split: {n_train} train, {n_valid} valid lines (duplicates removed: {len(lines) - n_train - n_valid})"
    )
    if tokenizer is None:
        model = corpus.train_sentencepiece(
            train, os.path.join(stage, "spm"), args.vocab_size or 8000, args.model_type
        )
        log.info(f"sentencepiece model {os.path.join(args.output_dir, os.path.basename(model))}")
        tokenizer = build_tokenizer(TokenizerSpec("sentencepiece", spm_model=str(model)))
    for split, path in (("train", train), ("valid", valid)):
        corpus.encode_file(tokenizer, path, os.path.join(stage, "tok", f"{split}.txt"))
    srcdict = args.srcdict
    if lines_wp and not srcdict:
        srcdict = os.path.join(stage, "tok", "dict.txt")
        corpus.atomic_write_lines(srcdict, lines_wp)
    dest = corpus.binarize(
        os.path.join(stage, "tok", "train.txt"),
        os.path.join(stage, "tok", "valid.txt"),
        os.path.join(stage, "data-bin"),
        workers=args.workers,
        srcdict=srcdict,
        nwords=args.vocab_size if args.tokenizer == "whitespace" and args.vocab_size else -1,
        name_as=os.path.join(args.output_dir, "data-bin"),
    )
    write_record(dest, tokenizer, moved_from=stage, moved_to=args.output_dir)
    _log_unknown_rates(dest, log, stage, args.output_dir)
    log.info(f"{args.tokenizer} tokenizer fingerprint {tokenizer.fingerprint()[:12]}")
    return dest


def _log_unknown_rates(dest, log, stage, out):
    """Repeat fairseq-preprocess's per-split <unk> rates (its preprocess.log in data-bin/)."""
    path = os.path.join(dest, "preprocess.log")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "replaced by <unk>" in line or "replaced (by" in line:
                    log.info(line.split(" | ")[-1].strip().replace(str(stage), str(out)))


def _check_wordpiece_srcdict(srcdict, lines, vocab):
    """--srcdict must list the vocabulary's entries in its order, or ids would not match the model."""
    with open(srcdict, encoding="utf-8") as f:
        given = [l.rstrip("\r\n").rsplit(" ", 1)[0] for l in f if l.strip()]
    want = [l.rsplit(" ", 1)[0] for l in lines]
    if given != want:
        at = next(
            (i for i, (a, b) in enumerate(zip(given, want)) if a != b), min(len(given), len(want))
        )
        fail(
            f"--srcdict {srcdict} is not the dictionary of --vocab {vocab} ({len(given)} vs {len(want)} entries, "
            f"first difference at line {at + 1}); give the dict.txt written with that vocabulary "
            "(convert_hf.py import), or leave --srcdict out"
        )


if __name__ == "__main__":
    sys.exit(main())
