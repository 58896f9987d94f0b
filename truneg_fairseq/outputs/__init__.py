"""Writing outputs safely, one job per module (all standard library, relative imports only, so
the package loads on its own, without torch or fairseq):

* ``atomic``: one file written atomically (:func:`atomic_open`) and a failed write (full disk,
  quota, file-size limit, read-only directory) said as one error (:func:`write_errors`);
* ``locks``: one run at a time per output (:func:`output_lock`);
* ``marker``: which files of an output directory a command wrote (``.truneg-output.json``);
* ``swap``: replacing a command's files by a new set, and recovering a swap a kill cut short;
* ``dirs``: whole output directories (:func:`atomic_dir`, :func:`staged_entries`);
* ``inputs``: an output that is one of the run's inputs refused (:func:`refuse_inputs_as_outputs`,
  and for the files found as the run reads them, :func:`reading`);
* ``output_errors``: :class:`OutputDirError` and :class:`InputAsOutputError` (re-exported by
  :mod:`truneg_fairseq.errors`).

``truneg_fairseq.io_utils`` re-exports these names for scripts written against earlier releases;
the package imports them from here."""

from .atomic import (
    WRITE_ERRNOS,
    atomic_open,
    temp_beside,
    write_errors,
    write_failure,
    write_failure_message,
)
from .dirs import atomic_dir, check_dir, check_entries, staged_entries
from .inputs import (
    InputAsOutputError,
    begin_run,
    declare_outputs,
    end_run,
    files_in,
    reading,
    refuse_inputs_as_outputs,
    refuse_read_outputs,
    same_file,
    split_files,
)
from .locks import lock_path, output_lock
from .marker import MARKER, read_marker
from .output_errors import OutputDirError

__all__ = [
    "InputAsOutputError",
    "MARKER",
    "OutputDirError",
    "WRITE_ERRNOS",
    "atomic_dir",
    "atomic_open",
    "begin_run",
    "check_dir",
    "check_entries",
    "declare_outputs",
    "end_run",
    "files_in",
    "lock_path",
    "output_lock",
    "read_marker",
    "reading",
    "refuse_inputs_as_outputs",
    "refuse_read_outputs",
    "same_file",
    "split_files",
    "staged_entries",
    "temp_beside",
    "write_errors",
    "write_failure",
    "write_failure_message",
]
