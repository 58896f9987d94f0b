"""Score a SQuAD v1.1 predictions file against a dev JSON (official normalisation).

  truneg-squad-eval dev-v1.1.json predictions.json

predictions.json maps question id -> answer text. Prints on stdout the JSON the official SQuAD
v1.1 evaluate-v1.1.py prints, {"exact_match", "f1", ...} in % at full precision (the same
floats, for programs that read it), then on stderr the two scores rounded to 2 decimals for the
reader; questions without a prediction score 0 and are counted in "missing_predictions".
"""

import argparse
import json
import sys

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import fail, interruptible


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    p.add_argument("dataset", help="SQuAD v1.1 JSON (dev-v1.1.json)")
    p.add_argument("predictions", help="JSON: question id -> answer text")
    return p


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    from truneg_fairseq.data.corpus_steps import CorpusError
    from truneg_fairseq.pipelines.squad_run import score_predictions_file

    try:
        res = score_predictions_file(args.dataset, args.predictions)
    except CorpusError as e:
        fail(str(e))
    if res["missing_predictions"]:
        print(
            f"warning: {res['missing_predictions']} of {res['questions']} questions have no "
            "prediction (scored 0)",
            file=sys.stderr,
        )
    print(json.dumps(res), flush=True)
    print(
        f"exact_match {res['exact_match']:.2f} | f1 {res['f1']:.2f} | {res['questions']} questions",
        file=sys.stderr,
    )
    return 0
