#!/usr/bin/env python
"""Prepare a corpus for pre-training: raw text -> sentencepiece -> fairseq data-bin.

Writes, under --output-dir:
  raw/train.txt raw/valid.txt   the text, deduplicated, shuffled and split (seeded)
  spm.model spm.vocab           a sentencepiece model trained on raw/train.txt
  tok/train.txt tok/valid.txt   the text as pieces
  data-bin/                     fairseq-preprocess --only-source output (dict.txt, mmap shards)

Input is either your own UTF-8 text files (one sentence or document per line; .gz, .bz2 and .xz
are decompressed; a binary or non-UTF-8 file is refused, naming the file and line) or, with
--wordnet-glosses, the built-in corpus: WordNet's definitions and example sentences.

Example:
  python scripts/prepare_corpus.py --wordnet-glosses --output-dir work --vocab-size 8000
  python scripts/prepare_corpus.py --input corpus/*.txt --output-dir work --vocab-size 32000
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli_utils import fail, setup_logging  # noqa: E402


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", help="raw text files")
    src.add_argument("--wordnet-glosses", action="store_true", help="use the built-in WordNet-gloss corpus")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--vocab-size", type=int, default=8000, help="sentencepiece vocabulary size (default 8000)")
    p.add_argument("--model-type", default="unigram", choices=["unigram", "bpe"])
    p.add_argument("--valid-fraction", type=float, default=0.02)
    p.add_argument("--max-lines", type=int, default=0, help="keep at most this many lines (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="fairseq-preprocess workers")
    return p


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.prepare_corpus")
    from truneg_fairseq import corpus

    out = args.output_dir
    outputs = [os.path.join(out, n) for n in ("raw", "spm.model", "spm.vocab", "tok", "data-bin")]
    new = [p for p in outputs + [out] if not os.path.exists(p)]  # removed again if this run fails
    try:
        if args.wordnet_glosses:
            lines = list(corpus.wordnet_gloss_lines())
            log.info(f"WordNet glosses: {len(lines)} lines")
        else:
            lines = []
            for path in args.input:  # checked before anything is written
                lines += [" ".join(l.split()) for l in corpus.read_text_lines(path)]
            empty = sum(1 for l in lines if not l)
            lines = [l for l in lines if l]
            log.info(f"read {len(lines)} non-empty lines from {len(args.input)} file(s) ({empty} empty lines skipped)")
            if not lines:
                fail(f"--input {' '.join(args.input)}: no text (all lines empty); give a corpus with one sentence per line")
        if args.max_lines:
            lines = lines[: args.max_lines]
        train, valid, n_train, n_valid = corpus.write_split_corpus(lines, os.path.join(out, "raw"), args.valid_fraction, args.seed)
        log.info(f"split: {n_train} train, {n_valid} valid lines (duplicates removed: {len(lines) - n_train - n_valid})")
        model = corpus.train_sentencepiece(train, os.path.join(out, "spm"), args.vocab_size, args.model_type)
        log.info(f"sentencepiece model {model}")
        for split, path in (("train", train), ("valid", valid)):
            corpus.encode_file(model, path, os.path.join(out, "tok", f"{split}.txt"))
        dest = corpus.binarize(os.path.join(out, "tok", "train.txt"), os.path.join(out, "tok", "valid.txt"),
                               os.path.join(out, "data-bin"), workers=args.workers)
        log.info(f"binarized data in {dest} (dictionary {os.path.join(dest, 'dict.txt')})")
        new = []
    except corpus.CorpusError as e:
        fail(str(e))
    finally:
        for p in new:  # a failed run leaves no half-built outputs behind
            if p == out:
                if os.path.isdir(out) and not os.listdir(out):
                    os.rmdir(out)
            elif os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
