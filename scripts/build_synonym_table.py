#!/usr/bin/env python
"""Build the synonym table of a fairseq dictionary (input to --synonym-table).

For every dict.txt entry that is a whole word (sentencepiece "▁word", GPT-2 "Ġword", a WordPiece
entry without "##", or any alphabetic entry for whitespace tokenization), collect its synonyms
that are whole-word entries too, and save sorted (gold, pred) id pairs plus the dictionary's
fingerprint. Continuation pieces (no "▁"/"Ġ", or "##") are recorded and never corrected. When
the data directory holds the tokenizer_fingerprint.json that prepare_corpus.py writes, the
tokenizer given here must be the one recorded there.

Sources:
  wordnet    (default) all single-word lemma names of the word's WordNet synsets, lower-cased,
             stopwords dropped; WordNet is found offline (see docs/install.md, "WordNet").
  embedding  the top-k cosine neighbours in a GloVe / word2vec text file (--vectors).

Examples:
  python scripts/build_synonym_table.py --dict data-bin/dict.txt --tokenizer sentencepiece \\
      --spm-model spm.model --output data-bin/synonyms.npz
  python scripts/build_synonym_table.py --dict data-bin/dict.txt --tokenizer gpt2 \\
      --gpt2-encoder-json encoder.json --source embedding --vectors glove.6B.50d.txt \\
      --output data-bin/synonyms.glove.npz
  python scripts/build_synonym_table.py --dict data-bin/dict.txt --tokenizer wordpiece \\
      --vocab bert-base-uncased/vocab.txt --output data-bin/synonyms.npz
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402
from truneg_fairseq.text import add_tokenizer_args  # noqa: E402


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dict", required=True, help="fairseq dict.txt (from fairseq-preprocess)")
    add_tokenizer_args(
        p
    )  # GPT-2: encoder.json is enough here (vocab.bpe optional, checked to exist)
    p.add_argument(
        "--source",
        default="wordnet",
        choices=["wordnet", "embedding"],
        help="where synonyms come from (default: wordnet)",
    )
    p.add_argument("--vectors", help="GloVe / word2vec text file (with --source embedding)")
    p.add_argument(
        "--topk",
        type=int,
        default=10,
        help="neighbours per word for --source embedding (default 10)",
    )
    p.add_argument("--output", required=True, help="table file to write (.npz), written atomically")
    return p


def _check_output_is_no_input(args) -> None:
    """--output replaces its file: naming an input there (say --dict) would destroy the input
    with the table built from it, so it is refused before anything is read."""
    out = os.path.realpath(args.output)
    for flag in ("dict", "spm_model", "gpt2_encoder_json", "gpt2_vocab_bpe", "vocab", "vectors"):
        value = getattr(args, flag, None)
        if value and os.path.realpath(value) == out:
            fail(
                f"--output {args.output} is the --{flag.replace('_', '-')} input: the table would overwrite it. "
                "Give another --output (e.g. synonyms.npz beside dict.txt)"
            )
    if os.path.isdir(out):
        fail(
            f"--output {args.output} is a directory: give the table's file name (e.g. {os.path.join(args.output, 'synonyms.npz')})"
        )


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.build_synonym_table")
    from truneg_fairseq.lexicon import (
        SynonymTableError,
        WordNetNotFoundError,
        build_table,
        vocab_view,
    )
    from truneg_fairseq.text import TokenizerError, check_record, tokenizer_from_args

    if args.source == "embedding" and not args.vectors:
        fail("--source embedding needs --vectors FILE (GloVe or word2vec text format)")
    _check_output_is_no_input(args)
    try:
        tokenizer = tokenizer_from_args(args, view_only=True)
        check_record(args.dict, tokenizer)
        view = vocab_view(args.dict, tokenizer)
        n_words = sum(w is not None for w in view.words)
        log.info(
            f"{args.dict}: {len(view.symbols)} entries, {n_words} word-start entries of ASCII letters, "
            f"{sum(view.continuation)} continuation pieces"
        )
        table, report = build_table(view, source=args.source, vectors=args.vectors, topk=args.topk)
        table.save(args.output)
    except (SynonymTableError, TokenizerError, WordNetNotFoundError) as e:
        fail(str(e))
    size_kb = os.path.getsize(args.output) / 1024
    log.info(f"source {args.source}: {report.num_pairs} synonym pairs")
    log.info(report.describe(len(view.symbols), args.source, args.topk, args.tokenizer))
    log.info(f"wrote {args.output} ({size_kb:.1f} KiB) in {report.seconds:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
