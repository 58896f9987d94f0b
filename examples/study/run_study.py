#!/usr/bin/env python
"""Counter-false-negative pre-training over training: the paper's Table 2 (correction ratios at
20/40/60/80/100% of training), the MLM-side effects and Figure-3 cases, from one command.

Installed, this is the console command ``truneg-study``; its code is
``truneg_fairseq/cli/study.py`` (``truneg-study --help``).
"""

import sys

from truneg_fairseq.cli.study import main

if __name__ == "__main__":
    sys.exit(main())
