#!/usr/bin/env python
"""Evaluate masked-LM checkpoints on a binarized split: MLM loss (bits/token, as fairseq logs
it), accuracy, and the paper's correction statistics (prediction- and iteration-level ratios,
in %) when a synonym table is given. Masks are seeded, so checkpoints are compared on the same
masked positions.

Example:
  python scripts/evaluate_mlm.py --data data-bin --synonym-table data-bin/synonyms.npz \\
      ckpt/masked_lm/checkpoint_last.pt ckpt/hc/checkpoint_last.pt
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli_utils import fail, setup_logging  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--data", required=True, help="data-bin directory (dict.txt + binarized splits)")
    p.add_argument("--synonym-table", help="table for the correction statistics (optional)")
    p.add_argument("--subset", default="valid")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-batches", type=int, default=0, help="0: the whole split")
    p.add_argument("--seed", type=int, default=1, help="masking seed (same for every checkpoint)")
    p.add_argument("--json", action="store_true", help="print one JSON object per checkpoint")
    args = p.parse_args(argv)
    setup_logging("truneg_fairseq.evaluate_mlm")
    from truneg_fairseq.evaluate import evaluate_mlm

    for ck in args.checkpoints:
        if not os.path.isfile(ck):
            fail(f"checkpoint {ck} not found")
        res = evaluate_mlm(ck, args.data, args.synonym_table, args.subset, args.batch_size, args.max_batches, args.seed)
        if args.json:
            print(json.dumps({"checkpoint": ck, **res}))
        else:
            print(f"{ck}: " + " | ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
