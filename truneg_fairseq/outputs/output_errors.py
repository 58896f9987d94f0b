"""The errors of output writing, defined here so that ``outputs/`` loads on its own (standard
library only) and re-exported by :mod:`truneg_fairseq.errors`, the package's one list of errors."""


class OutputDirError(RuntimeError):
    """An output directory or file this command may not write: the message says why and what
    to do."""


class InputAsOutputError(OutputDirError):
    """An output of the command that is a file it reads (:mod:`truneg_fairseq.outputs.inputs`):
    the message names the output's flag and the input."""
