#!/usr/bin/env python
"""Score a SQuAD v1.1 predictions file against a dev JSON (official normalisation).

Installed, this is the console command ``truneg-squad-eval``; its code is
``truneg_fairseq/cli/squad_eval.py`` (``truneg-squad-eval --help``).
"""

import sys

from truneg_fairseq.cli.squad_eval import main

if __name__ == "__main__":
    sys.exit(main())
