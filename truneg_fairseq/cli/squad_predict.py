"""Write SQuAD v1.1 predictions (question id -> answer text) for a fine-tuned checkpoint.

  truneg-squad-predict ckpt/checkpoint_best.pt --data squad-data \\
      --output predictions.json [--subset valid]

DATA is the --task squad folder (dict.txt, SUBSET.json); the windowing and tokenizer settings
come from the checkpoint. The output is written atomically; score it with truneg-squad-eval.
"""

import argparse
import json

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.checkpoint_command import (
    checkpoint_errors,
    parse_checkpoint_command,
    refuse_checkpoint_outputs,
)
from truneg_fairseq.cli.common import add_checkpoint_args, interruptible, write_output


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    add_checkpoint_args(p, help="checkpoint fine-tuned with --task squad (.pt)")
    p.add_argument("--data", required=True, help="the --task squad folder (dict.txt, SUBSET.json)")
    p.add_argument("--output", required=True)
    p.add_argument("--subset", default="valid")
    p.add_argument("--batch-size", type=int, default=16, help="questions per batch")
    return p


@interruptible
def main(argv=None) -> int:
    args = parse_checkpoint_command(
        get_parser(), argv, "truneg_fairseq.squad_predict", must_exist=True
    )
    from truneg_fairseq.outputs import files_in

    inputs = [("--data", p) for p in files_in(args.data, ["dict.txt", f"{args.subset}.json"])]
    refuse_checkpoint_outputs(args, {"--output": args.output}, inputs)
    from truneg_fairseq.pipelines.squad_run import SquadPredictConfig, predict_squad

    cfg = SquadPredictConfig(args.checkpoint, args.data, args.subset, args.batch_size)
    with checkpoint_errors():
        preds = predict_squad(cfg)
    write_output("--output", args.output, lambda f: json.dump(preds, f, indent=1))
    print(f"wrote {len(preds)} predictions to {args.output}")
    return 0
