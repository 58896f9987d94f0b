#!/usr/bin/env python
"""Write perturbed copies of evaluation files in their original formats (seeded).

Installed, this is the console command ``truneg-perturb``; its code is
``truneg_fairseq/cli/perturb.py`` (``truneg-perturb --help``).
"""

import sys

from truneg_fairseq.cli.perturb import main

if __name__ == "__main__":
    sys.exit(main())
