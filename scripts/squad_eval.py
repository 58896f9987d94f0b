#!/usr/bin/env python
"""Score a SQuAD v1.1 predictions file against a dev JSON (official normalisation).

  python scripts/squad_eval.py dev-v1.1.json predictions.json

predictions.json maps question id -> answer text. Prints {"exact_match", "f1", ...}; questions
without a prediction score 0 and are counted in "missing_predictions".
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("dataset", help="SQuAD v1.1 JSON (dev-v1.1.json)")
    p.add_argument("predictions", help="JSON: question id -> answer text")
    args = p.parse_args(argv)
    from truneg_fairseq.data.corpus import CorpusError
    from truneg_fairseq.data.squad import read_squad_file
    from truneg_fairseq.evaluation.squad_metrics import evaluate

    try:  # the answers are scored by text: their offsets are not checked here
        data = read_squad_file(args.dataset, check_answers=False)[0]["data"]
    except CorpusError as e:
        fail(str(e))
    try:
        with open(args.predictions, encoding="utf-8") as f:
            preds = json.load(f)
    except FileNotFoundError:
        fail(f"predictions file {args.predictions} not found")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        fail(
            f"predictions file {args.predictions} is not JSON ({e}); expected question id -> answer text"
        )
    if not isinstance(preds, dict):
        fail(f"{args.predictions}: expected an object mapping question id -> answer text")
    res = evaluate(data, preds)
    if res["missing_predictions"]:
        print(
            f"warning: {res['missing_predictions']} of {res['questions']} questions have no prediction (scored 0)",
            file=sys.stderr,
        )
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
