#!/usr/bin/env python
"""Build CLINE's training triples: raw sentences -> (x_ori, x_syn, x_ant) -> fairseq data-bin.

For each sentence (one per line), x_syn replaces ~40% of the eligible words (non-stopword nouns,
verbs, adjectives, adverbs; part of speech from WordNet) by a WordNet synonym, hypernym or
morphological variant of the same part of speech, and x_ant ~20% by a WordNet antonym, or a
random word of the same part of speech from the training text when there is none. Only single
words are inserted. Sentences with no eligible word are kept (x_syn = x_ant = x_ori, no
contrastive term in training) and counted.

Writes, under --output-dir:
  tok/{split}.{ori,syn,ant}             tokenized text (sentencepiece pieces or GPT-2 BPE ids)
  tok/{split}.{syn,ant}_label           1 per token replaced, else 0
  data-bin/                             dict.txt, {split}.{ori,syn,ant,syn_label,ant_label}.{bin,idx},
                                        cline_meta.json (the data for --task cline)
  cline_summary.json                    sentences, eligible words, replacement rates, share
                                        without any antonym, sentences without an eligible word

Examples:
  # sentencepiece data of scripts/prepare_corpus.py, same dictionary as the masked-LM model
  python scripts/make_cline_data.py --train work/raw/train.txt --valid work/raw/valid.txt \\
      --tokenizer sentencepiece --spm-model work/spm.model --srcdict work/data-bin/dict.txt \\
      --output-dir work/cline
  # fairseq's roberta.base: GPT-2 BPE and its dict.txt
  python scripts/make_cline_data.py --input corpus.txt --tokenizer gpt2 \\
      --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict roberta.base/dict.txt \\
      --output-dir cline-bin --workers 16

Everything is seeded per sentence (--seed): the output does not depend on --workers.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402
from truneg_fairseq.data.cline import TOKENIZERS  # noqa: E402
from truneg_fairseq.io_utils import OutputDirError  # noqa: E402
from truneg_fairseq.text import TokenizerSpec, add_tokenizer_args  # noqa: E402


def get_parser():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--train", help="training sentences, one per line (.gz/.bz2/.xz read too)")
    src.add_argument("--input", nargs="+", help="sentences to split (seeded) into train/valid")
    src.add_argument(
        "--wordnet-glosses",
        action="store_true",
        help="the built-in corpus: WordNet's glosses and examples",
    )
    p.add_argument("--valid", help="validation sentences (with --train)")
    p.add_argument(
        "--valid-fraction",
        type=float,
        default=0.01,
        help="valid share with --input/--wordnet-glosses (0.01)",
    )
    p.add_argument(
        "--max-lines",
        type=int,
        default=0,
        help="keep at most this many lines of --input/--wordnet-glosses",
    )
    p.add_argument("--output-dir", required=True)
    add_tokenizer_args(p, default="sentencepiece", kinds=TOKENIZERS)
    p.add_argument(
        "--srcdict",
        help="dict.txt of the model to continue (default: built from the train triples)",
    )
    p.add_argument(
        "--syn-rate",
        type=float,
        default=0.4,
        help="share of eligible words replaced in x_syn (0.4)",
    )
    p.add_argument(
        "--ant-rate",
        type=float,
        default=0.2,
        help="share of eligible words replaced in x_ant (0.2)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="processes building the triples")
    p.add_argument("--log-every", type=int, default=100000, help="progress line every N sentences")
    return p


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.make_cline_data")
    from truneg_fairseq.data import cline, corpus

    if args.valid and not args.train:
        fail(
            "--valid goes with --train (with --input the valid split is drawn by --valid-fraction)"
        )
    try:
        if args.train:
            splits = {"train": args.train}
            if args.valid:
                splits["valid"] = args.valid
        else:
            if args.wordnet_glosses:
                lines = list(corpus.wordnet_gloss_lines())
            else:
                lines = []
                for path in args.input:
                    lines += [" ".join(l.split()) for l in corpus.read_text_lines(path)]
            if args.max_lines:
                lines = lines[: args.max_lines]
            if not any(lines):
                fail(
                    f"--input {' '.join(args.input or [])}: no text (all lines empty); give one sentence per line"
                )
            _, _, n_train, n_valid = corpus.write_split_corpus(
                lines, os.path.join(args.output_dir, "raw"), args.valid_fraction, args.seed
            )
            log.info(f"split: {n_train} train, {n_valid} valid sentences")
            splits = {
                s: os.path.join(args.output_dir, "raw", f"{s}.txt") for s in ("train", "valid")
            }
        settings = cline.Settings(
            seed=args.seed,
            syn_rate=args.syn_rate,
            ant_rate=args.ant_rate,
            tokenizer=TokenizerSpec.from_args(args),
        )
        cline.make_cline_data(
            splits,
            args.output_dir,
            settings,
            srcdict=args.srcdict,
            workers=max(1, args.workers),
            log_every=args.log_every,
        )
    except (cline.ClineDataError, corpus.CorpusError, OutputDirError) as e:
        fail(str(e))
    log.info(
        f"CLINE data in {os.path.join(args.output_dir, 'data-bin')}; summary in "
        f"{os.path.join(args.output_dir, 'cline_summary.json')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
