"""Atomic file output, output locks and output ownership: the names callers import from here,
now kept in :mod:`truneg_fairseq.outputs` (one module per job)."""

from truneg_fairseq.outputs import (  # noqa: F401  (re-exported)
    MARKER,
    WRITE_ERRNOS,
    OutputDirError,
    atomic_dir,
    atomic_open,
    lock_path,
    output_lock,
    read_marker,
    staged_entries,
    write_errors,
    write_failure,
    write_failure_message,
)
from truneg_fairseq.outputs.marker import HASHED_UP_TO  # noqa: F401

__all__ = [
    "HASHED_UP_TO",
    "MARKER",
    "OutputDirError",
    "WRITE_ERRNOS",
    "atomic_dir",
    "atomic_open",
    "lock_path",
    "output_lock",
    "read_marker",
    "staged_entries",
    "write_errors",
    "write_failure",
    "write_failure_message",
]
