#!/usr/bin/env python
"""Gather GLUE fine-tuning runs into one Table-3-style row (per task + average).

Installed, this is the console command ``truneg-glue-table``; its code is
``truneg_fairseq/cli/glue_table.py`` (``truneg-glue-table --help``).
"""

import sys

from truneg_fairseq.cli.glue_table import main

if __name__ == "__main__":
    sys.exit(main())
