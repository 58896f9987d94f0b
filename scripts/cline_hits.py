#!/usr/bin/env python
"""CLINE's "Hits" (Table 7): is a sentence closer to its synonym version than to its antonym version?

Installed, this is the console command ``truneg-cline-hits``; its code is
``truneg_fairseq/cli/cline_hits.py`` (``truneg-cline-hits --help``).
"""

import sys

from truneg_fairseq.cli.cline_hits import main

if __name__ == "__main__":
    sys.exit(main())
