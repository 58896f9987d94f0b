"""Check or record what made a finished stage of a shell recipe (the warm-up of
examples/bert/pretrain.sh and examples/electra/pretrain.sh), so that a later run reuses the
stage only when the same command would make it from the same inputs:

  python -m truneg_fairseq.cli.stage_record check DIR NAME [--output PATH]... -- CMD...
  python -m truneg_fairseq.cli.stage_record record DIR NAME [--output PATH]... -- CMD...

CMD is the stage's command line: its flags, and the fingerprints of the files and data-bins it
names, are compared (DIR and each --output are the stage's outputs, left out). ``check`` exits
0 when DIR/.truneg-stages.json records NAME as made by CMD, 1 (what differs on stderr) when it
was made otherwise, 3 when there is no record. Standard library only: no fairseq or torch is
imported.
"""

import sys

from truneg_fairseq.outputs.stages import main

if __name__ == "__main__":
    sys.exit(main())
