"""Build the synonym table of a fairseq dictionary (input to --synonym-table).

For every dict.txt entry that is a whole word (sentencepiece "▁word", GPT-2 "Ġword", a WordPiece
entry without "##", or any alphabetic entry for whitespace tokenization), collect its synonyms
that are whole-word entries too, and save sorted (gold, pred) id pairs plus the dictionary's
fingerprint. Continuation pieces (no "▁"/"Ġ", or "##") are recorded and never corrected. When
the data directory holds the tokenizer_fingerprint.json that truneg-prepare-corpus writes, the
tokenizer given here must be the one recorded there.

Sources:
  wordnet    (default) all single-word lemma names of the word's WordNet synsets, lower-cased,
             stopwords dropped; WordNet is found offline (see docs/install.md, "WordNet").
  embedding  the top-k cosine neighbours in a GloVe / word2vec text file (--vectors).

Examples:
  truneg-build-synonyms --dict data-bin/dict.txt --tokenizer sentencepiece \\
      --spm-model spm.model --output data-bin/synonyms.npz
  truneg-build-synonyms --dict data-bin/dict.txt --tokenizer gpt2 \\
      --gpt2-encoder-json encoder.json --source embedding --vectors glove.6B.50d.txt \\
      --output data-bin/synonyms.glove.npz
  truneg-build-synonyms --dict data-bin/dict.txt --tokenizer wordpiece \\
      --vocab bert-base-uncased/vocab.txt --output data-bin/synonyms.npz
"""

import argparse
import os

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import (
    add_dict_flag,
    check_required_dict,
    fail,
    interruptible,
    setup_logging,
)
from truneg_fairseq.text import TokenizerSpec, add_tokenizer_args


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    add_dict_flag(p, help="fairseq dict.txt (from fairseq-preprocess)")
    # GPT-2: encoder.json is enough here (vocab.bpe optional, checked to exist)
    add_tokenizer_args(p)
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


@interruptible
def main(argv=None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    check_required_dict(parser, args)
    log = setup_logging("truneg_fairseq.build_synonym_table")
    from truneg_fairseq.errors import TrunegError
    from truneg_fairseq.pipelines.build_synonym_table import SynonymTableConfig, build_synonym_table

    cfg = SynonymTableConfig(
        dict=args.dict,
        output=args.output,
        tokenizer=TokenizerSpec.from_args(args),
        source=args.source,
        vectors=args.vectors,
        topk=args.topk,
    )
    try:
        report, view = build_synonym_table(cfg)
    except TrunegError as e:  # the table, the tokenizer, WordNet
        fail(str(e))
    size_kb = os.path.getsize(args.output) / 1024
    log.info(f"source {args.source}: {report.num_pairs} synonym pairs")
    log.info(report.describe(len(view.symbols), args.source, args.topk, args.tokenizer))
    log.info(f"wrote {args.output} ({size_kb:.1f} KiB) in {report.seconds:.1f}s")
    return 0
