"""Compatibility of fairseq 0.12 with current torch.

torch >= 2.6 loads checkpoints with ``weights_only=True`` by default, and fairseq's
``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load`` without the argument, so resuming
``fairseq-train`` or ``--restore-file`` fails with ``Unsupported global: argparse.Namespace``. The
plugin allow-lists exactly the plain-data globals fairseq checkpoints hold, instead of turning the
weights-only protection off (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch


def fairseq_checkpoint_globals() -> list:
    """Globals found in fairseq checkpoints: the legacy ``args`` namespace and numpy scalars
    (best validation scores kept in ``extra_state``)."""
    out = [argparse.Namespace, np.dtype]
    core = getattr(np, "_core", None) or np.core  # numpy >= 2 / numpy < 2
    out.append(core.multiarray.scalar)
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        out += [getattr(dtypes, n) for n in ("Float64DType", "Float32DType", "Int64DType") if hasattr(dtypes, n)]
    return out


def allow_fairseq_checkpoints() -> None:
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:  # torch < 2.4 has no weights-only default to work around
        add(fairseq_checkpoint_globals())
