#!/usr/bin/env python
"""Write SQuAD v1.1 predictions (question id -> answer text) for a fine-tuned checkpoint.

Installed, this is the console command ``truneg-squad-predict``; its code is
``truneg_fairseq/cli/squad_predict.py`` (``truneg-squad-predict --help``).
"""

import sys

from truneg_fairseq.cli.squad_predict import main

if __name__ == "__main__":
    sys.exit(main())
