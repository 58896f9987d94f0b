#!/usr/bin/env python
"""Convert between HuggingFace directories and the plugin's fairseq checkpoints.

Installed, this is the console command ``truneg-convert-hf``; its code is
``truneg_fairseq/cli/convert_hf.py`` (``truneg-convert-hf --help``).
"""

import sys

from truneg_fairseq.cli.convert_hf import main

if __name__ == "__main__":
    sys.exit(main())
