#!/usr/bin/env python
"""Write one predicted label per line for a binarized GLUE-format split.

Installed, this is the console command ``truneg-glue-predict``; its code is
``truneg_fairseq/cli/glue_predict.py`` (``truneg-glue-predict --help``).
"""

import sys

from truneg_fairseq.cli.glue_predict import main

if __name__ == "__main__":
    sys.exit(main())
