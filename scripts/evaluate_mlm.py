#!/usr/bin/env python
"""Evaluate masked-LM checkpoints side by side (MLM loss, accuracy, the false-negative
statistics) on binarized data or raw text: one table, the same masks for every checkpoint.
Everything is in truneg_fairseq/cli/evaluate_mlm.py (``--help`` for the flags).

Examples:
  python scripts/evaluate_mlm.py --data data-bin --synonym-table data-bin/synonyms.npz \\
      --table-md table.md ckpt/masked_lm/checkpoint_last.pt ckpt/hc/checkpoint_last.pt
  python scripts/evaluate_mlm.py --text wikitext-2-raw/wiki.valid.raw \\
      --synonym-table imported/bert-base/synonyms.npz --show 5 imported/bert-base
"""

import sys

from truneg_fairseq.cli.evaluate_mlm import main

if __name__ == "__main__":
    sys.exit(main())
