#!/usr/bin/env python
"""Original -> transformed results and the drop, as in the paper's Table 5.

Installed, this is the console command ``truneg-robustness-report``; its code is
``truneg_fairseq/cli/robustness_report.py`` (``truneg-robustness-report --help``).
"""

import sys

from truneg_fairseq.cli.robustness_report import main

if __name__ == "__main__":
    sys.exit(main())
