#!/usr/bin/env python
"""The built-in demo: false negatives appear, and the criterions act on them (WordNet corpus,
one small RoBERTa pre-trained once and continued with each criterion, every checkpoint scored on
the same masks). A first small table comes within about two minutes, before the full run goes
on (--quick stops there). Everything is in truneg_fairseq/cli/demo.py (``--help`` for the flags).
"""

import sys

from truneg_fairseq.cli.demo import main

if __name__ == "__main__":
    sys.exit(main())
