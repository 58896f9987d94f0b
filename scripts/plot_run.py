#!/usr/bin/env python
"""The false-negative statistics of one training run over its updates (table and plots) from
its fairseq log or tensorboard folder.

Installed, this is the console command ``truneg-plot-run``; its code is
``truneg_fairseq/cli/plot_run.py`` (``truneg-plot-run --help``).
"""

import sys

from truneg_fairseq.cli.plot_run import main

if __name__ == "__main__":
    sys.exit(main())
