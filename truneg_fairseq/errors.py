"""Every error type of the package, in one place: the scripts, and fairseq's commands
(``compat/refusals.py``), turn them into one-line messages naming the file or flag and the fix.
A leaf: it imports nothing of the package but the standard-library ``outputs`` package's own
errors (re-exported here), so every module may raise them; each module that raises one also
imports it under its own name. Every one of them derives from :class:`TrunegError` (defined with
the output errors, so that ``outputs/`` loads on its own), and keeps its builtin base too."""

from truneg_fairseq.outputs.output_errors import (  # noqa: F401  (re-exported)
    InputAsOutputError,
    OutputDirError,
    TrunegError,
)


class CorpusError(ValueError, TrunegError):
    """A corpus, vocabulary or tokenizer file that cannot be used as given; the message names the
    file and what to do."""


class ClineDataError(ValueError, TrunegError):
    """CLINE data that cannot be built as asked (settings, input files, a tokenizer without piece
    spans). Here rather than in the CLINE data module because the piece encoder of the text layer
    raises it too, and the scripts catch one type."""


class SynonymTableError(ValueError, TrunegError):
    """A synonym table that cannot be built, written or used as given (re-exported by
    :mod:`truneg_fairseq.lexicon`); the message names the file and the fix."""


class FlagError(ValueError, TrunegError):
    """Flags, or a file a flag names, that a run cannot be trained or loaded with as given: met
    where fairseq builds the task, model or criterion; the message names the flags and the fix."""


class HFTrainError(ValueError, TrunegError):
    """An input of ``truneg-hf-train`` that cannot be used; the message names it and the fix."""


class LineTooLongError(CorpusError):
    """A line of an input text file longer than any command uses
    (:mod:`truneg_fairseq.text.lines`); the message names the file, the line and the limit."""


# ---- the errors of each part of the package (their modules import them from here) ------------


class TokenizerError(CorpusError):
    """A tokenizer that cannot be built or does not fit its data; the message says what to do."""


class LogReadError(CorpusError):
    """A training log or events folder that holds no statistics."""


class WordNetNotFoundError(RuntimeError, TrunegError):
    pass


class UnsafeCheckpointError(ValueError, TrunegError):
    """A checkpoint's config holds code where fairseq expects a value, an unknown field, or a
    value of the wrong type."""


class UnknownArchitectureError(UnsafeCheckpointError):
    """A checkpoint of a model family the plugin does not load."""


class CheckpointError(RuntimeError, TrunegError):
    """A checkpoint or its data directory cannot be used: the message names the file and the fix."""


class ModelValueError(ValueError, TrunegError):
    """A model config value of the wrong type, outside its range, or larger than the weights
    (the plugin's loaders report it as they report an unsafe checkpoint)."""


class DataIndexError(ValueError, TrunegError):
    """A ``.idx`` whose sizes do not describe its ``.bin``, or a ``.bin`` holding a token id
    outside the dictionary it is read with."""

    # the attribute of an opened split (fairseq's MMapIndexedDataset) that holds
    # (dictionary entries, path prefix) when it was opened with a dictionary
    BOUND = "truneg_token_bound"

    @classmethod
    def token_outside(cls, dataset, where: str, token: int) -> "DataIndexError":
        """The error for ``token`` read at ``where`` (e.g. "sentence 2") of ``dataset``."""
        entries, path = getattr(dataset, cls.BOUND)
        return cls(
            f"{path}.bin: {where} holds token id {token}, outside the {entries} entries of the "
            "dictionary it is read with: the split was binarized with another dict.txt, or is "
            "damaged; binarize it again with this data directory's dict.txt "
            "(scripts/prepare_corpus.py, or fairseq-preprocess --srcdict)"
        )


class SampleTooLongError(ValueError, TrunegError):
    """A sample (a sentence, with ``--sample-break-mode eos``) longer than the model's positions,
    where the run may not leave it out."""


class ArchiveError(ValueError, TrunegError):
    """An archive given to fairseq's hub that cannot be extracted as given (truncated, damaged,
    members that contradict each other, no room to extract it): the message names it and the fix."""


class UnsafeArchiveError(ArchiveError):
    """An archive with a member that would be written outside its extraction directory, or
    that would expand to more than its bounds (:func:`check_size`)."""


class PrecisionFlagError(ValueError, TrunegError):
    """Two mixed-precision modes asked for at once."""


class SyncDebugSettingError(ValueError, TrunegError):
    """``TRUNEG_SYNC_DEBUG`` set to something other than warn or error."""


class ImportSizesError(ValueError, TrunegError):
    pass


class GlueFinetuneError(ValueError, TrunegError):
    """A checkpoint, data folder or path the fine-tuning config cannot be written for; the
    message names it and the fix."""


class ConversionError(ValueError, TrunegError):
    """A directory or checkpoint that cannot be converted; the message says what to do."""


class TokenizerWithoutMaskError(ValueError, TrunegError):
    """The tokenizer cannot serve masked-LM training (no mask or padding token)."""


class ModelError(ValueError, TrunegError):
    """A model that cannot be trained with the asked objective; the message names the fix."""


class ObjectiveError(ValueError, TrunegError):
    """An objective that cannot be registered, made or found (core/objectives), or a parameter
    it does not take; the message names the objective and the fix."""
