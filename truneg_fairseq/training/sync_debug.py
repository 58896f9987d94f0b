"""``TRUNEG_SYNC_DEBUG=warn|error``: torch's sync debug mode inside each training update on a GPU.

The update that never waits (:mod:`.fast_update`) runs every update from the sixth on
(compilation and CUDA-graph recording come first) under ``torch.cuda.set_sync_debug_mode``, so
that anything in it that waits for the device warns or raises with its stack. Any other value
is refused in one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Optional

import torch

from truneg_fairseq.errors import (
    SyncDebugSettingError,  # noqa: F401  (defined in the one place of the errors)
)

logger = logging.getLogger("truneg_fairseq.fast_update")


def sync_debug_setting() -> Optional[str]:
    """``TRUNEG_SYNC_DEBUG``: ``warn`` or ``error`` (anything else is refused), or None."""
    value = os.environ.get("TRUNEG_SYNC_DEBUG", "").strip().lower()
    if not value:
        return None
    if value not in ("warn", "error"):
        raise SyncDebugSettingError(
            f"TRUNEG_SYNC_DEBUG={value!r}: set it to warn or error (torch's sync debug mode "
            "inside each training update on a GPU), or unset it"
        )
    logger.info(f"TRUNEG_SYNC_DEBUG={value}: a wait for the device inside an update {value}s")
    return value


@contextlib.contextmanager
def _sync_debug_mode(mode: str):
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def sync_guard(mode: Optional[str], cuda: bool, num_updates: int):
    """The context update number ``num_updates + 1`` runs in: the sync debug mode ``mode`` on a
    GPU from the sixth update on, nothing otherwise."""
    if mode is None or not cuda or num_updates < 5:
        return contextlib.nullcontext()
    return _sync_debug_mode(mode)
