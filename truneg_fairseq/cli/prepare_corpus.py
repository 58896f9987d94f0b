"""Prepare a corpus for pre-training: raw text -> tokenizer -> fairseq data-bin.

Writes, under --output-dir:
  spm.model spm.vocab           a sentencepiece model trained on the training split (--tokenizer
                                sentencepiece without --spm-model; the default)
  data-bin/                     what fairseq-preprocess --only-source writes (dict.txt, mmap
                                shards, preprocess.log) and tokenizer_fingerprint.json (the
                                tokenizer and its files' sha256: build_synonym_table.py checks
                                it, --mask-whole-words finds the tokenizer there)
  data-bin/shard1 ... shardN-1/  with --shards N: the training split's other shards (shard 0 is
                                data-bin/train.*); fairseq-train DATA is data-bin:data-bin/shard1:...
                                (one shard an epoch; the log prints it)
and, with --keep-intermediates, what the data-bin is made from (otherwise removed once it is
written; together they take about twice the text's size):
  raw/train.txt raw/valid.txt   the text, deduplicated, shuffled and split (seeded)
  tok/train.txt tok/valid.txt   the text as dict.txt symbols

The text is read, deduplicated and split as a stream, through temporary files in the output
directory (about twice the distinct text while the split runs): memory does not grow with the
corpus. The log counts the lines read, the empty lines skipped and the duplicates dropped.

--tokenizer wordpiece --vocab VOCAB tokenizes with BERT's WordPiece (HF tokenizers; lower-cased
as the vocabulary's tokenizer_config.json/config.json says, else when it has no upper-case
entries) and binarizes with the dict.txt of that vocabulary (its id order after fairseq's
specials; [CLS] [SEP] [PAD] [UNK] [MASK] are <s> </s> <pad> <unk> <mask>), so ids match a model
imported with convert_hf.py (--dict IMPORT/dict.txt is checked to be that dictionary).
--tokenizer gpt2 writes BPE ids; --tokenizer whitespace keeps the words (with --vocab-size N,
the N most frequent words of the training text; the others become <unk>, and the <unk> rate of
each split is logged). With --dict (--srcdict) the dictionary is not built from the data but
taken as given.

Input is either your own UTF-8 text files (one sentence or document per line; .gz, .bz2 and .xz
are decompressed; a binary or non-UTF-8 file is refused, naming the file and line) or, with
--wordnet-glosses, the built-in corpus: WordNet's definitions and example sentences.

Tokenizing and binarizing run over --workers processes (default: every core); each stage logs
its progress every --progress-every seconds. A SIGTERM or SIGKILL of the command ends every
process it started.

Example:
  python scripts/prepare_corpus.py --wordnet-glosses --output-dir work --vocab-size 8000
  python scripts/prepare_corpus.py --input corpus/*.txt --output-dir work --vocab-size 32000
  python scripts/prepare_corpus.py --input corpus.txt --output-dir work-bert --tokenizer wordpiece \\
      --vocab imported/bert-base-uncased/vocab.txt --dict imported/bert-base-uncased/dict.txt
"""

import argparse

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import add_dict_flag, count_arg, fail, interruptible, setup_logging
from truneg_fairseq.errors import CorpusError
from truneg_fairseq.outputs import OutputDirError
from truneg_fairseq.text import TokenizerSpec, add_tokenizer_args


def _positive(text: str) -> int:
    n = count_arg(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return n


def get_parser():
    from truneg_fairseq.pipelines.corpus import BINARIZERS, CorpusConfig

    d = CorpusConfig(output_dir="")
    p = command_parser(__doc__)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", help="raw text files")
    src.add_argument(
        "--wordnet-glosses", action="store_true", help="use the built-in WordNet-gloss corpus"
    )
    p.add_argument(
        "--wordnet-headwords",
        action="store_true",
        help="with --wordnet-glosses: start each definition line with its synset's words, as a "
        'dictionary entry does ("chief, main, primary, principal: most important element")',
    )
    p.add_argument("--output-dir", required=True)
    add_tokenizer_args(p, default="sentencepiece")
    add_dict_flag(
        p, required=False, help="binarize with this dict.txt instead of one built from the data"
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
        default=d.model_type,
        choices=["unigram", "bpe"],
        help="type of the sentencepiece model trained when --spm-model is not given",
    )
    p.add_argument(
        "--spm-sample-lines",
        type=_positive,
        default=d.spm_sample_lines,
        help="sentencepiece without --spm-model: train on a seeded sample of this many lines of "
        f"the training text (default {d.spm_sample_lines:,}; its time and memory grow with it)",
    )
    p.add_argument("--valid-fraction", type=float, default=d.valid_fraction)
    p.add_argument("--max-lines", type=int, default=0, help="keep at most this many lines (0: all)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--workers",
        type=_positive,
        default=None,
        help="processes that tokenize and binarize (and fairseq-preprocess's --workers); "
        "default: every available core",
    )
    p.add_argument(
        "--binarizer",
        choices=BINARIZERS,
        default=d.binarizer,
        help="fast: the plugin's binarizer, the files fairseq-preprocess writes byte for byte in "
        "a tenth of its time; fairseq-preprocess: fairseq's own (default: fast)",
    )
    p.add_argument(
        "--keep-intermediates",
        action="store_true",
        help="keep raw/ (the split text) and tok/ (the tokenized text) beside the data-bin; "
        "by default they are removed once it is written",
    )
    p.add_argument(
        "--shards",
        type=_positive,
        default=d.shards,
        metavar="N",
        help="write the training split in N shards (data-bin/ and data-bin/shard1 ...; fairseq "
        "trains epoch e on shard (e-1) %% N), so that a training process holds the index of one "
        "shard, not of the whole corpus; the log gives the DATA argument (default 1)",
    )
    p.add_argument(
        "--progress-every",
        type=float,
        default=d.progress_every,
        metavar="SECONDS",
        help=f"seconds between the progress lines of a stage (default {d.progress_every:g})",
    )
    return p


def config_from_args(args):
    from truneg_fairseq.pipelines.corpus import CorpusConfig

    return CorpusConfig(
        output_dir=args.output_dir,
        inputs=list(args.input or []),
        wordnet_glosses=args.wordnet_glosses,
        wordnet_headwords=args.wordnet_headwords,
        tokenizer=TokenizerSpec.from_args(args),
        dict=args.dict,
        vocab_size=args.vocab_size,
        model_type=args.model_type,
        spm_sample_lines=args.spm_sample_lines,
        valid_fraction=args.valid_fraction,
        max_lines=args.max_lines,
        seed=args.seed,
        workers=args.workers,
        binarizer=args.binarizer,
        progress_every=args.progress_every,
        keep_intermediates=args.keep_intermediates,
        shards=args.shards,
    )


@interruptible
def main(argv=None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.wordnet_headwords and not args.wordnet_glosses:
        parser.error(
            "--wordnet-headwords goes with --wordnet-glosses (the built-in corpus), not with --input"
        )
    log = setup_logging("truneg_fairseq.prepare_corpus")
    from truneg_fairseq.pipelines.corpus import prepare_corpus

    try:
        prepare_corpus(config_from_args(args), log)
    except (CorpusError, OutputDirError) as e:
        fail(str(e))
    return 0
