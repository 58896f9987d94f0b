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
An input (the sentences, --dict, the tokenizer's files) is never replaced by an output: one
that would be is an error naming its flag.

Examples:
  # sentencepiece data of truneg-prepare-corpus --keep-intermediates, same dictionary as the
  # masked-LM model
  truneg-make-cline-data --train work/raw/train.txt --valid work/raw/valid.txt \\
      --tokenizer sentencepiece --spm-model work/spm.model --dict work/data-bin/dict.txt \\
      --output-dir work/cline
  # fairseq's roberta.base: GPT-2 BPE and its dict.txt
  truneg-make-cline-data --input corpus.txt --tokenizer gpt2 \\
      --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --dict roberta.base/dict.txt \\
      --output-dir cline-bin --workers 16

Everything is seeded per sentence (--seed): the output does not depend on --workers.
"""

import argparse
import os

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import add_dict_flag, fail, interruptible, setup_logging
from truneg_fairseq.text import PIECE_KINDS, TokenizerSpec, add_tokenizer_args


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
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
    # the kinds CLINE data accepts (data.cline.TOKENIZERS), named without importing torch
    add_tokenizer_args(p, default="sentencepiece", kinds=PIECE_KINDS)
    add_dict_flag(
        p,
        required=False,
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


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.make_cline_data")
    from truneg_fairseq.errors import ClineDataError, CorpusError
    from truneg_fairseq.outputs import OutputDirError
    from truneg_fairseq.pipelines.cline_run import ClineDataConfig, build_cline_data

    cfg = ClineDataConfig(
        output_dir=args.output_dir,
        tokenizer=TokenizerSpec.from_args(args),
        train=args.train,
        valid=args.valid,
        input=list(args.input or []),
        wordnet_glosses=args.wordnet_glosses,
        valid_fraction=args.valid_fraction,
        max_lines=args.max_lines,
        dict=args.dict,
        syn_rate=args.syn_rate,
        ant_rate=args.ant_rate,
        seed=args.seed,
        workers=args.workers,
        log_every=args.log_every,
    )
    try:
        build_cline_data(cfg)
    except (ClineDataError, CorpusError, OutputDirError) as e:
        fail(str(e))
    log.info(
        f"CLINE data in {os.path.join(args.output_dir, 'data-bin')}; summary in "
        f"{os.path.join(args.output_dir, 'cline_summary.json')}"
    )
    return 0
