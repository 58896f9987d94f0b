#!/usr/bin/env python
"""Build CLINE's training triples: raw sentences -> (x_ori, x_syn, x_ant) -> fairseq data-bin.

Installed, this is the console command ``truneg-make-cline-data``; its code is
``truneg_fairseq/cli/make_cline_data.py`` (``truneg-make-cline-data --help``).
"""

import sys

from truneg_fairseq.cli.make_cline_data import main

if __name__ == "__main__":
    sys.exit(main())
