"""The error of output writing (a leaf: the rest of ``outputs/`` and the package raise it)."""


class OutputDirError(RuntimeError):
    """An output directory or file this command may not write: the message says why and what
    to do."""
