"""Errors of the data side and of a run's flags that the scripts, and fairseq's commands
(``compat/refusals.py``), turn into one-line messages (a leaf: it imports nothing of the package
but the standard-library ``outputs`` package's own error, so every module may raise them)."""

from truneg_fairseq.outputs.errors import OutputDirError  # noqa: F401  (one place for all errors)


class CorpusError(ValueError):
    """A corpus, vocabulary or tokenizer file that cannot be used as given; the message names the
    file and what to do."""


class ClineDataError(ValueError):
    """CLINE data that cannot be built as asked (settings, input files, a tokenizer without piece
    spans). Here rather than in the CLINE data module because the piece encoder of the text layer
    raises it too, and the scripts catch one type."""


class SynonymTableError(ValueError):
    """A synonym table that cannot be built, written or used as given (re-exported by
    :mod:`truneg_fairseq.lexicon`); the message names the file and the fix."""


class FlagError(ValueError):
    """Flags, or a file a flag names, that a run cannot be trained or loaded with as given: met
    where fairseq builds the task, model or criterion; the message names the flags and the fix."""


class HFTrainError(ValueError):
    """An input of ``truneg-hf-train`` that cannot be used; the message names it and the fix."""


class LineTooLongError(CorpusError):
    """A line of an input text file longer than any command uses
    (:mod:`truneg_fairseq.text.lines`); the message names the file, the line and the limit."""
