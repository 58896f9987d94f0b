#!/usr/bin/env python
"""Print every flag a fairseq-train command line accepts, including those of its task, model
and criterion (``fairseq-train --help`` stops before adding them).

Example:
  python scripts/train_help.py --user-dir truneg_fairseq --task electra --arch electra_small \\
      --criterion mlm_hard_correction
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in ([], ["-h"], ["--help"]):
        print(__doc__)
        return 0
    from truneg_fairseq.cli.train_help import training_help

    print(training_help(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
