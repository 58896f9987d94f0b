"""Checkpoint loading errors, said in words: a truncated file, a model trained with another
dictionary, a model of another shape. Scripts turn them into one line naming the file."""

import pickle
import re
import zipfile
from typing import Optional

_SHAPE = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from checkpoint, "
    r"the shape in current model is torch\.Size\(\[([\d, ]*)\]\)"
)
_EMBEDDINGS = ("embed_tokens.weight", "embeddings.token.weight", "lm_head.weight", "lm_head.bias")
_CORRUPT = ("PytorchStreamReader failed", "failed finding central directory", "Ran out of input",
            "invalid load key", "unexpected EOF", "file might be corrupted")


def describe_load_error(path, exc: BaseException, data: Optional[str] = None) -> Optional[str]:
    """One message for an exception raised while loading checkpoint ``path`` (evaluated on
    ``data``), or None when the exception is not a known loading problem (re-raise it then)."""
    from truneg_fairseq.compat import UnsafeCheckpointError

    if isinstance(exc, UnsafeCheckpointError):
        return str(exc)  # names the file and the field already
    text = str(exc)
    unreadable = isinstance(exc, (EOFError, zipfile.BadZipFile, pickle.UnpicklingError)) and "GLOBAL" not in text
    if unreadable or any(s in text for s in _CORRUPT):
        first = text.strip().splitlines()[0].split(". ")[0] if text.strip() else type(exc).__name__
        return (f"{path} is not a readable checkpoint: truncated or corrupt ({first}). Use another "
                "one (checkpoint_best.pt, an earlier checkpoint_N_M.pt) or copy it again")
    mismatches = _SHAPE.findall(text)
    for name, ckpt_shape, model_shape in mismatches:
        if name.endswith(_EMBEDDINGS):
            n_ckpt, n_here = ckpt_shape.split(",")[0], model_shape.split(",")[0]
            where = f"{data}/dict.txt" if data else "the dictionary given here"
            return (f"{path} was trained with another dictionary: its vocabulary has {n_ckpt} entries, "
                    f"{where} gives {n_here}. Evaluate it on the data-bin it was trained on (the same dict.txt)")
    if mismatches:
        name, a, b = mismatches[0]
        return (f"{path} does not fit the model built here ({name}: [{a}] in the checkpoint, [{b}] here; "
                f"{len(mismatches)} parameters differ): the architecture flags differ from the training run")
    return None
