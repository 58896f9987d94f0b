"""truneg-fairseq: counter-false-negative masked-LM pre-training as a fairseq ``--user-dir`` plugin.

fairseq imports this package by directory name (``--user-dir truneg_fairseq``); it auto-imports
``tasks/`` and ``models/`` but not ``criterions/`` or ``optim/``, so all are imported here.
"""

from . import compat

compat.install()

from . import criterions, models, optim, tasks  # noqa: E402,F401  (registration)
from .text import give_masked_lm_whole_words  # noqa: E402  (and the ``wordpiece`` BPE)

# the one mend outside compat/: it needs the tokenizer layer above compat (compat/__init__.py)
give_masked_lm_whole_words()

__version__ = "0.1.0"
