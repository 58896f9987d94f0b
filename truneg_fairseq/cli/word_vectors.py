"""Count-based word vectors for a fairseq dictionary: the start of a small model's embeddings.

Counts the pairs of dict.txt words within --window words of each other in each line of --text,
weights them by positive pointwise mutual information and keeps a rank --dim SVD, rows scaled to
unit length; writes one row per dictionary entry (fairseq's specials and <mask> as zero rows) to
--output (.npy). Give it to fairseq-train as --truneg-embed-init FILE (--arch truneg_roberta_*,
--encoder-embed-dim equal to --dim): the tied input/output embeddings then start from these
vectors. The demo uses it so that a 4 x 128 model leaves the unigram plateau within minutes on a
CPU; a model trained for long does not need it.

Example (work/raw/ is what truneg-prepare-corpus --keep-intermediates keeps):
  truneg-word-vectors --dict work/data-bin/dict.txt --text work/raw/train.txt \\
      --dim 128 --output work/data-bin/word_vectors.npy
"""

import argparse
import os

from truneg_fairseq.cli.args import command_parser, parse_with_dict
from truneg_fairseq.cli.common import (
    add_dict_flag,
    fail,
    flag_inputs,
    interruptible,
    refuse_inputs_as_outputs,
    setup_logging,
)


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    add_dict_flag(p, help="fairseq dict.txt (the data-bin's)")
    p.add_argument(
        "--text", required=True, help="training text, one line per sentence, words as in dict.txt"
    )
    p.add_argument("--output", required=True, help=".npy file written")
    p.add_argument(
        "--dim",
        type=int,
        default=128,
        help="vector size = the model's --encoder-embed-dim (default 128)",
    )
    p.add_argument(
        "--window", type=int, default=5, help="words on each side counted as context (default 5)"
    )
    return p


@interruptible
def main(argv=None) -> int:
    args = parse_with_dict(get_parser(), argv)
    setup_logging("truneg_fairseq.data.ppmi_vectors")
    for flag, path in (("--dict", args.dict), ("--text", args.text)):
        if not os.path.isfile(path):
            fail(f"{flag} {path} not found")
    if args.dim < 1 or args.window < 1:
        fail("--dim and --window must be >= 1")
    refuse_inputs_as_outputs({"--output": args.output}, flag_inputs(args, ("--dict", "--text")))
    from truneg_fairseq.data.ppmi_vectors import write_vectors
    from truneg_fairseq.outputs import OutputDirError

    try:
        write_vectors(args.dict, args.text, args.output, args.dim, args.window)
    except (ValueError, UnicodeDecodeError) as e:
        fail(f"--text {args.text}: {e}")
    except OutputDirError as e:
        fail(f"--output {e}")
    return 0
