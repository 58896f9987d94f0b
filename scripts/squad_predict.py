#!/usr/bin/env python
"""Write SQuAD v1.1 predictions (question id -> answer text) for a fine-tuned checkpoint.

  python scripts/squad_predict.py --data squad-data --checkpoint ckpt/checkpoint_best.pt \\
      --output predictions.json [--subset valid]

DATA is the --task squad folder (dict.txt, SUBSET.json); the windowing and tokenizer settings
come from the checkpoint. The output is written atomically; score it with scripts/squad_eval.py.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--subset", default="valid")
    p.add_argument("--batch-size", type=int, default=16, help="questions per batch")
    args = p.parse_args(argv)
    setup_logging("truneg_fairseq.squad_predict")
    if not os.path.isfile(args.checkpoint):
        fail(f"--checkpoint {args.checkpoint} not found")
    import torch

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
    from truneg_fairseq.data import squad
    from truneg_fairseq.io_utils import atomic_open

    try:
        models, cfg, task = load_for_inference(args.checkpoint, args.data)
    except CheckpointError as e:
        fail(str(e))
    if cfg.task._name != "squad":
        fail(f"{args.checkpoint} was not fine-tuned with --task squad (task {cfg.task._name})")
    model = models[0].eval()
    task.load_dataset(args.subset)
    ds = task.dataset(args.subset)
    preds = {}
    with torch.no_grad():
        for start in range(0, len(ds), args.batch_size):
            sample = ds.collater(
                [ds[i] for i in range(start, min(start + args.batch_size, len(ds)))]
            )
            s, e = squad.span_logits(
                model, sample["net_input"]["src_tokens"], task.dictionary.pad()
            )
            preds.update(
                squad.decode(
                    sample["squad"], s, e, task.cfg.squad_n_best, task.cfg.squad_max_answer_len
                )
            )
    with atomic_open(args.output) as f:
        json.dump(preds, f, indent=1)
    print(f"wrote {len(preds)} predictions to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
