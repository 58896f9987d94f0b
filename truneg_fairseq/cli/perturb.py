"""Write perturbed copies of evaluation files in their original formats (seeded).

  # SQuAD v1.1 dev: WordNet synonym swaps (answers kept, offsets moved) or a distractor sentence
  truneg-perturb squad --method swap_syn_wordnet dev-v1.1.json dev.swap.json
  truneg-perturb squad --method add_sentence_diverse dev-v1.1.json dev.addsent.json
  # a GLUE task folder: synonym swaps in the text columns of dev TSVs (train copied unchanged)
  truneg-perturb glue --task RTE glue_data/RTE glue_swap/RTE

swap_syn_wordnet: probability --prob (0.1) per eligible word, at most --max-swaps (10) per text,
single-word lemmas only. The outputs are read by every recipe unchanged; the input is never
replaced by the output.
"""

import argparse

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import fail, interruptible, setup_logging


def get_parser() -> argparse.ArgumentParser:
    from truneg_fairseq.data.glue_tasks import TASKS

    p = command_parser(__doc__)
    sub = p.add_subparsers(dest="kind", required=True)
    sq = sub.add_parser("squad")
    sq.add_argument("--method", required=True, choices=["swap_syn_wordnet", "add_sentence_diverse"])
    sq.add_argument("input")
    sq.add_argument("output")
    gl = sub.add_parser("glue")
    gl.add_argument("--task", required=True, choices=list(TASKS))
    gl.add_argument("input", help="the task folder (e.g. glue_data/RTE)")
    gl.add_argument("output", help="folder to write")
    for s in (sq, gl):
        s.add_argument("--seed", type=int, default=1)
        s.add_argument("--prob", type=float, default=0.1)
        s.add_argument("--max-swaps", type=int, default=10)
    return p


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    setup_logging("truneg_fairseq.data.perturbations")
    from truneg_fairseq.errors import TrunegError
    from truneg_fairseq.lexicon import WordNetNotFoundError, load_wordnet
    from truneg_fairseq.pipelines.perturb import (
        PerturbConfig,
        perturb_glue_folder,
        perturb_squad_file,
    )

    try:
        wn = load_wordnet()
    except WordNetNotFoundError as e:
        fail(str(e))
    cfg = PerturbConfig(
        input=args.input,
        output=args.output,
        method=getattr(args, "method", "swap_syn_wordnet"),
        seed=args.seed,
        prob=args.prob,
        max_swaps=args.max_swaps,
    )
    try:
        if args.kind == "squad":
            perturb_squad_file(cfg, wn)
        else:
            perturb_glue_folder(cfg, args.task, wn)
    except TrunegError as e:  # the input files, the output
        fail(str(e))
    return 0
