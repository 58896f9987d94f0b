#!/usr/bin/env python
"""Print every flag a fairseq-train command line accepts, task, model and criterion flags included.

Installed, this is the console command ``truneg-train-help``; its code is
``truneg_fairseq/cli/train_help.py`` (``truneg-train-help --help``).
"""

import sys

from truneg_fairseq.cli.train_help import main

if __name__ == "__main__":
    sys.exit(main())
