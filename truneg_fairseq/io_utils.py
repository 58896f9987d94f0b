"""Atomic file output, output locks and output ownership: the names callers import from here,
now kept in :mod:`truneg_fairseq.outputs` (one module per job), whose ``__all__`` this module
re-exports."""

from truneg_fairseq import outputs
from truneg_fairseq.outputs import *  # noqa: F403  (re-exported)
from truneg_fairseq.outputs.marker import HASHED_UP_TO  # noqa: F401

__all__ = [*outputs.__all__, "HASHED_UP_TO"]
