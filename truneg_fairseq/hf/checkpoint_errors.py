"""A checkpoint of ``truneg-hf-train`` that cannot be written or loaded: one line saying where,
why and what to do (a full disk or a file-size limit while saving; a truncated, damaged or
code-carrying file while resuming), not a traceback."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Optional

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.hf.run_record import AFRESH

_WRITER_TEXTS = (
    (("os error 27", "File too large"), "File too large"),
    (("os error 28", "No space left"), "No space left on device"),
    (("os error 122", "Disk quota"), "Disk quota exceeded"),
)


def write_failure_line(path, e: BaseException, need: int, what: str, last: Optional[str]) -> str:
    """The one line said of a checkpoint or model whose write into ``path`` failed for lack of
    space or a file-size limit: where, why, the space free there and what a save takes."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else ""
    for errno_text, said in _WRITER_TEXTS:  # a writer's own error (safetensors, torch's zip)
        if not why and any(t in str(e) for t in errno_text):
            why = said
    why = why or "disk full or a file-size limit"
    try:
        free = f"{shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 1e6:,.0f} MB"
    except OSError:
        free = "unknown space"
    then = f"the same command resumes from {last}" if last else "no checkpoint was complete yet"
    return (
        f"{path}: writing failed ({why}); {free} free on that disk, and a checkpoint of this "
        f"model (weights and optimizer state) takes about {need / 1e6:,.1f} MB: free space (or "
        f"raise the file-size limit, ulimit -f) or give another --output-dir; {what}; {then}"
    )


@contextlib.contextmanager
def loading(checkpoint, names):
    """Loading the files ``names`` of ``checkpoint`` (torch ``weights_only`` loads): a file that
    holds other Python objects (torch refuses it), or is truncated or damaged, is one
    :class:`OutputDirError` naming it; any other error passes."""
    try:
        yield
    except Exception as e:
        if isinstance(e, OutputDirError):
            raise
        line = _unloadable(Path(checkpoint), names, e)
        if line is None:
            raise
        raise OutputDirError(line) from None


def _unloadable(checkpoint: Path, names, error: BaseException) -> Optional[str]:
    import torch

    present = [checkpoint / n for n in names if (checkpoint / n).is_file()]
    if not present:
        return None
    culprit, why = None, error
    if len(present) > 1:  # which one: each loaded alone, tensors and plain values only
        for path in present:
            try:
                torch.load(path, map_location="cpu", weights_only=True)
            except Exception as e:
                culprit, why = path, e
                break
        if culprit is None:
            return None
    else:
        culprit = present[0]
    after = f"move {checkpoint} away to resume from the checkpoint before it, or {AFRESH}"
    if isinstance(why, pickle.UnpicklingError):
        m = re.search(r"Unsupported global: GLOBAL (\S+)", str(why))
        what = f" ({m.group(1)})" if m else ""
        return (
            f"{culprit} holds Python objects{what} where a checkpoint holds tensors and plain "
            f"values only: it was not loaded (loading it could run code). It is not a file this "
            f"run wrote; {after}"
        )
    if isinstance(why, (RuntimeError, EOFError, ValueError, OSError)):
        first = (str(why).strip().splitlines() or [type(why).__name__])[0][:160]
        return f"{culprit} cannot be read ({first}): it is truncated or damaged; {after}"
    return None
