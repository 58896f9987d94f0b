"""truneg-fairseq: counter-false-negative masked-LM pre-training as a fairseq ``--user-dir`` plugin.

fairseq imports this package by directory name (``--user-dir truneg_fairseq``); it auto-imports
``tasks/`` and ``models/`` but not ``criterions/`` or ``optim/``, so all are imported here.
"""

from . import compat

compat.allow_fairseq_checkpoints()
compat.atomic_checkpoint_copies()
compat.trusted_worker_broadcast()
compat.safe_checkpoint_configs()
compat.numpy_compat_long()
compat.stop_prefetch_at_exit()
compat.quiet_config_composition()
compat.amp_unscales_once()
compat.bf16_means_autocast()
compat.keep_remainder_batch()

from . import criterions, models, optim, tasks  # noqa: E402,F401  (registration)
from .text import give_masked_lm_whole_words  # noqa: E402  (and the ``wordpiece`` BPE)

give_masked_lm_whole_words()

__version__ = "0.1.0"
