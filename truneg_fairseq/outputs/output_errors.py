"""The errors of output writing, defined here so that ``outputs/`` loads on its own (standard
library only) and re-exported by :mod:`truneg_fairseq.errors`, the package's one list of errors.
The base of every error of the package, :class:`TrunegError`, is defined here for the same
reason (the output errors derive from it too)."""


class TrunegError(Exception):
    """The base of every error type of the package (:mod:`truneg_fairseq.errors`): ``except
    TrunegError`` catches any of them. Each type also keeps its builtin base (``ValueError``,
    ``RuntimeError``), so code that catches those goes on catching it."""


class OutputDirError(RuntimeError, TrunegError):
    """An output directory or file this command may not write: the message says why and what
    to do."""


class InputAsOutputError(OutputDirError):
    """An output of the command that is a file it reads (:mod:`truneg_fairseq.outputs.inputs`):
    the message names the output's flag and the input."""
