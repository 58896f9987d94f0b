"""The errors of checkpoint files, said in words: :func:`describe_load_error` turns an
exception of loading one (a truncated file, a model trained with another dictionary, a model of
another shape) into one message, :func:`checkpoint_write_errors` one of writing one (a full disk)
into a :class:`CheckpointError`. The mends of this package use them, and
:mod:`truneg_fairseq.checkpoints` (the plugin's loader, a user of this package) gives them to
the scripts."""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import zipfile
from typing import Optional

from truneg_fairseq.errors import (
    CheckpointError,  # noqa: F401  (defined in the one place of the errors)
    UnsafeCheckpointError,
)

_SHAPE = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from checkpoint, "
    r"the shape in current model is torch\.Size\(\[([\d, ]*)\]\)"
)
_EMBEDDINGS = ("embed_tokens.weight", "embeddings.token.weight", "lm_head.weight", "lm_head.bias")
# fairseq's utils.get_activation_fn, and omegaconf's check of a field that lists its choices
_ACTIVATION = re.compile(
    r"--activation-fn (\S+) not supported|Invalid value '([^']*)', expected one of \[[^]]*'gelu'"
)
_KEYS = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict: ((?:\"[^\"]+\"(?:, )?)+)")
_DICT_FORMAT = ("Incorrect dictionary format", "Duplicate word found when loading Dictionary")
_CORRUPT = (
    "PytorchStreamReader failed",
    "failed finding central directory",
    "Ran out of input",
    "invalid load key",
    "unexpected EOF",
    "file might be corrupted",
)


def describe_load_error(path, exc: BaseException, data: Optional[str] = None) -> Optional[str]:
    """One message for an exception raised while loading checkpoint ``path`` (evaluated on
    ``data``), or None when the exception is not a known loading problem (re-raise it then)."""
    from .model_values import ModelValueError

    if isinstance(exc, (UnsafeCheckpointError, ModelValueError)):
        return str(exc)  # names the file and the field already
    text = str(exc)
    if isinstance(exc, OSError) and exc.errno not in (None, errno.EINVAL):
        return f"{path} cannot be read ({exc.strerror or exc}): check the file and its permissions"
    unreadable = (
        isinstance(exc, (EOFError, zipfile.BadZipFile, pickle.UnpicklingError, OSError))
        and "GLOBAL" not in text
    )
    if unreadable or any(s in text for s in _CORRUPT):
        first = text.strip().splitlines()[0].split(". ")[0] if text.strip() else type(exc).__name__
        return (
            f"{path} is not a readable checkpoint: truncated or corrupt ({first}). Use another "
            "one (checkpoint_best.pt, an earlier checkpoint_N_M.pt) or copy it again"
        )
    if any(m in text for m in _DICT_FORMAT):
        where = f"{data}/dict.txt" if data else "the dictionary of its data directory"
        return (
            f"{where} is not a fairseq dictionary ({text.strip().splitlines()[0][:120]}): give the "
            f"data directory {path} was trained on (its dict.txt has lines '<symbol> <count>')"
        )
    act = _ACTIVATION.search(text)
    if act:
        from fairseq.utils import get_available_activation_fns

        name = act.group(1) or act.group(2)
        return (
            f"{path} records the activation function {name!r}, which fairseq does not "
            f"know ({', '.join(get_available_activation_fns())}): it was saved by other code or "
            "edited. Use a checkpoint saved by fairseq-train or scripts/convert_hf.py import"
        )
    mismatches = _SHAPE.findall(text)
    for name, ckpt_shape, model_shape in mismatches:
        if name.endswith(_EMBEDDINGS):
            n_ckpt, n_here = ckpt_shape.split(",")[0], model_shape.split(",")[0]
            where = f"{data}/dict.txt" if data else "the dictionary given here"
            return (
                f"{path} was trained with another dictionary: its vocabulary has {n_ckpt} entries, "
                f"{where} gives {n_here}. Evaluate it on the data-bin it was trained on (the same dict.txt)"
            )
    if mismatches:
        name, a, b = mismatches[0]
        return (
            f"{path} does not fit the model built here ({name}: [{a}] in the checkpoint, [{b}] here; "
            f"{len(mismatches)} parameters differ): the architecture flags differ from the training run"
        )
    keys = _KEYS.findall(text)
    if keys:
        said = "; ".join(
            f"{'in the checkpoint only' if kind == 'Unexpected' else 'in this model only'}: "
            f"{names.split(', ')[0].strip(chr(34))}"
            + (f" and {names.count(', ')} more" if ", " in names else "")
            for kind, names in keys
        )
        return (
            f"{path} does not fit the model built here ({said}): the architecture flags (e.g. the "
            "number of layers) differ from the training run"
        )
    return None


@contextlib.contextmanager
def checkpoint_write_errors(path, partial=None):
    """Around the writing of checkpoint ``path`` (fairseq's save, the atomic copies to
    ``checkpoint_last.pt``/``checkpoint_best.pt``): a write that fails for lack of space or
    permission removes the ``partial`` file it leaves (the ``.tmp`` being written) and becomes one
    :class:`CheckpointError` naming ``path`` and the fix; the checkpoints already in place stay
    whole (every save renames a complete file over them)."""
    from truneg_fairseq.outputs import write_failure

    try:
        yield
    except Exception as e:
        if isinstance(e, CheckpointError) or not write_failure(e):
            raise
        if partial is not None:
            try:
                os.unlink(partial)
            except OSError:
                pass
        why = (
            e.strerror
            if isinstance(e, OSError) and e.strerror
            else "disk full or a file-size limit"
        )
        raise CheckpointError(
            f"{path}: saving the checkpoint failed ({why}); the checkpoints already there are whole. "
            f"Free space in {os.path.dirname(os.path.abspath(str(path)))} or give another --save-dir, "
            "then resume (--restore-file checkpoint_last.pt)"
        ) from None
