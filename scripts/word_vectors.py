#!/usr/bin/env python
"""Count-based word vectors for a fairseq dictionary: the start of a small model's embeddings.

Installed, this is the console command ``truneg-word-vectors``; its code is
``truneg_fairseq/cli/word_vectors.py`` (``truneg-word-vectors --help``).
"""

import sys

from truneg_fairseq.cli.word_vectors import main

if __name__ == "__main__":
    sys.exit(main())
