"""Original -> transformed results and the drop, as in the paper's Table 5.

  truneg-robustness-report squad --ori dev-v1.1.json pred.json \\
      --trans dev.swap.json pred.swap.json --name "ELECTRA-small HC / SwapSynWordNet"
  truneg-robustness-report glue --ori runs/RTE/train.log --trans runs_swap/RTE/train.log
  truneg-robustness-report contrast --tsv contrast_dev.tsv --pred preds.txt \\
      --pair-column pair_id --label-column label

SQuAD: EM/F1 of each predictions file against its own dev file (official normalisation).
GLUE: the best validation accuracy in each fairseq log (examples/glue/finetune.sh writes them).
contrast: a GLUE-format TSV whose rows carry a pair id (an original and its contrast variants
share one) and the predictions for its rows (truneg-glue-predict): accuracy and contrast
consistency "Con" (% of groups whose every row is predicted correctly).
"""

import argparse

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import fail, interruptible


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    sub = p.add_subparsers(dest="kind", required=True)
    sq = sub.add_parser("squad")
    sq.add_argument("--ori", nargs=2, required=True, metavar=("DEV", "PRED"))
    sq.add_argument("--trans", nargs=2, required=True, metavar=("DEV", "PRED"))
    gl = sub.add_parser("glue")
    gl.add_argument("--ori", required=True, metavar="LOG")
    gl.add_argument("--trans", required=True, metavar="LOG")
    co = sub.add_parser("contrast")
    co.add_argument("--tsv", required=True, help="GLUE-format TSV with a header")
    co.add_argument("--pred", required=True, help="one predicted label per data row")
    co.add_argument("--pair-column", default="pair_id")
    co.add_argument("--label-column", default="label")
    for s in (sq, gl, co):
        s.add_argument("--name", default="model")
    return p


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    from truneg_fairseq.errors import CorpusError
    from truneg_fairseq.pipelines import robustness

    try:
        if args.kind == "contrast":
            r = robustness.contrast_scores(args.tsv, args.pred, args.pair_column, args.label_column)
            print(f"{'model':<30} {'rows':>6} {'groups':>7} {'Acc':>6} {'Con':>6}")
            print(
                f"{args.name:<30} {r['rows']:>6} {r['groups']:>7} {r['accuracy']:>6.1f} "
                f"{r['consistency']:>6.1f}"
            )
            return 0
        if args.kind == "squad":
            ori = robustness.squad_scores(*args.ori)
            trans = robustness.squad_scores(*args.trans)
        else:
            ori, trans = robustness.glue_scores(args.ori), robustness.glue_scores(args.trans)
    except CorpusError as e:
        fail(str(e))
    print("\n".join(robustness.drop_row(args.name, ori, trans)))
    return 0
