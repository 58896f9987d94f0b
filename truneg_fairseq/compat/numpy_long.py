"""``numpy.compat.long`` under NumPy 2 (``numpy_compat_long``): fairseq's ``TokenBlockDataset``
with ``--sample-break-mode eos`` names it, and NumPy 2 removed ``numpy.compat``.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import types

import numpy as np


def numpy_compat_long() -> None:
    """``numpy.compat.long`` for fairseq's eos-mode ``TokenBlockDataset`` under NumPy 2."""
    if getattr(np, "compat", None) is None:  # NumPy 1 has it (imported lazily on access)
        np.compat = types.SimpleNamespace(long=np.int64)
