#!/usr/bin/env python
"""Continue a local HuggingFace masked-LM checkpoint with a counter-false-negative objective.

Installed, this is the console command ``truneg-hf-train``; its code is
``truneg_fairseq/cli/hf_train.py`` (``truneg-hf-train --help``).
"""

import sys

from truneg_fairseq.cli.hf_train import main

if __name__ == "__main__":
    sys.exit(main())
