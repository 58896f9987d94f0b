"""Write one predicted label per line for a binarized GLUE-format split, with a checkpoint
fine-tuned by fairseq's sentence_prediction (e.g. examples/glue/finetune.sh). The lines follow
the rows of the file the split was prepared from, for truneg-robustness-report contrast.

  truneg-glue-predict runs/SST-2/checkpoint_best.pt --data glue-bin/SST-2 \\
      --split valid --output preds.txt
"""

import argparse
import os

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.checkpoint_command import (
    checkpoint_errors,
    parse_checkpoint_command,
    refuse_checkpoint_outputs,
)
from truneg_fairseq.cli.common import add_checkpoint_args, fail, interruptible, write_output


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    add_checkpoint_args(p, help="checkpoint fine-tuned with sentence_prediction (.pt)")
    p.add_argument(
        "--data", required=True, help="the task's prepared folder (input0/, label/, ...)"
    )
    p.add_argument("--split", default="valid")
    p.add_argument("--output", required=True, help="predicted labels, one per line")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is a GPU)")
    return p


def _inputs(args) -> list:
    """(flag, file) of what the run reads besides the checkpoint: the task folder's dictionaries
    and binarized split."""
    from truneg_fairseq.outputs import files_in, split_files

    found = []
    for sub in ("input0", "input1", "label"):
        folder = os.path.join(args.data, sub)
        found += [("--data", p) for p in files_in(folder, ["dict.txt"])]
        found += [("--data", p) for p in split_files(folder, args.split)]
    return found


@interruptible
def main(argv=None) -> int:
    args = parse_checkpoint_command(get_parser(), argv, "glue_predict", must_exist=True)
    if not os.path.isdir(os.path.join(args.data, "input0")):
        fail(
            f"--data {args.data} has no input0/: give the folder truneg-prepare-glue wrote for "
            "the task"
        )
    refuse_checkpoint_outputs(args, {"--output": args.output}, _inputs(args))
    import torch

    from truneg_fairseq.evaluation.contrast import predict_labels

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with checkpoint_errors(ValueError, FileNotFoundError):
        labels = predict_labels(args.checkpoint, args.data, args.split, args.batch_size, device)
    write_output("--output", args.output, lambda f: f.write("".join(f"{x}\n" for x in labels)))
    print(f"wrote {len(labels)} predictions to {args.output}")
    return 0
