#!/usr/bin/env python
"""Prepare GLUE tasks for fine-tuning with fairseq's sentence_prediction task.

Installed, this is the console command ``truneg-prepare-glue``; its code is
``truneg_fairseq/cli/prepare_glue.py`` (``truneg-prepare-glue --help``).
"""

import sys

from truneg_fairseq.cli.prepare_glue import main

if __name__ == "__main__":
    sys.exit(main())
