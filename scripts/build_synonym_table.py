#!/usr/bin/env python
"""Build the synonym table of a fairseq dictionary (input to --synonym-table).

Installed, this is the console command ``truneg-build-synonyms``; its code is
``truneg_fairseq/cli/build_synonym_table.py`` (``truneg-build-synonyms --help``).
"""

import sys

from truneg_fairseq.cli.build_synonym_table import main

if __name__ == "__main__":
    sys.exit(main())
