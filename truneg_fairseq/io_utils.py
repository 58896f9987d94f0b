"""The earlier name of :mod:`truneg_fairseq.outputs` (atomic file output, output locks and output
ownership), kept for scripts written against earlier releases: it re-exports ``outputs``'s
``__all__``. The package itself imports :mod:`truneg_fairseq.outputs` (a test checks)."""

from truneg_fairseq import outputs
from truneg_fairseq.outputs import *  # noqa: F403  (re-exported)
from truneg_fairseq.outputs.marker import HASHED_UP_TO  # noqa: F401

__all__ = [*outputs.__all__, "HASHED_UP_TO"]
