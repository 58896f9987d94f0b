"""Checkpoint loading under current torch (``allow_fairseq_checkpoints``): torch >= 2.6 loads
checkpoints with ``weights_only=True`` by default, and fairseq's
``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load`` without the argument, so
resuming ``fairseq-train`` or ``--restore-file`` fails with ``Unsupported global:
argparse.Namespace``. The plugin allow-lists exactly the plain-data globals fairseq
checkpoints hold, instead of turning the weights-only protection off
(``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``).

Upstream: fairseq issue #5610 (checkpoints fail to load under torch >= 2.6's weights-only default);
open, no release since 0.12.2.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch


def fairseq_checkpoint_globals() -> list:
    """Globals found in fairseq checkpoints: the legacy ``args`` namespace and numpy scalars and
    arrays (best validation scores kept in ``extra_state``), all plain data.

    numpy 2 moved ``numpy.core`` to ``numpy._core``: a checkpoint written under numpy 1.x names
    ``numpy.core.multiarray.scalar``, one written under numpy 2 ``numpy._core.multiarray.scalar``.
    Both names are registered for the same objects (``(object, "name")`` entries), so old
    checkpoints load under either numpy; nothing else is added."""
    out = [argparse.Namespace, np.dtype, np.ndarray]
    core = getattr(np, "_core", None) or np.core  # numpy >= 2 / numpy < 2
    for name in ("scalar", "_reconstruct"):
        obj = getattr(core.multiarray, name, None)
        if obj is not None:
            out += [
                (obj, f"{prefix}.multiarray.{name}") for prefix in ("numpy.core", "numpy._core")
            ]
    dtypes = getattr(np, "dtypes", None)  # numpy >= 1.25: one class per dtype, named in pickles
    if dtypes is not None:
        out += [c for c in vars(dtypes).values() if isinstance(c, type) and issubclass(c, np.dtype)]
    return out


def allow_fairseq_checkpoints() -> None:
    """Allow-list :func:`fairseq_checkpoint_globals` for ``torch.load``'s weights-only mode."""
    # weights_only=True is torch.load's default from torch 2.6 on (earlier ones load everything,
    # and before 2.5 add_safe_globals takes no (object, name) entries)
    if torch.__version__ >= (2, 6):
        torch.serialization.add_safe_globals(fairseq_checkpoint_globals())
