"""One ``fairseq-train`` run at a time per ``--save-dir`` (``save_dir_lock``).

fairseq 0.12 lets two runs share a ``--save-dir``: both exit 0, the second loads the first's
``checkpoint_last.pt`` while it is being trained and each overwrites the other's checkpoints.
With the plugin loaded, the process that writes the checkpoints -- fairseq's master, the only one
that calls ``checkpoint_utils.verify_checkpoint_directory``, at the start of
``fairseq_cli.train.main``, before any checkpoint is loaded -- takes the output lock of
:mod:`truneg_fairseq.outputs.locks` for the save directory (``.NAME.lock`` beside it, naming host
and process), the lock every other command of the package takes for its outputs. A second run
stops there with one line naming the directory and the run holding it (a refusal,
:mod:`.refusals`). The lock is released when the run's ``call_main`` returns or fails (also when
a test runs several trainings in one process) and, for a worker fairseq spawned, at its exit; a
lock left by a killed run is taken over by the next run, with a log line.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os

from .wrapping import wrap_once

logger = logging.getLogger("fairseq_cli.train")

_held = {}  # absolute save directory -> the ExitStack that holds its lock


def _release_all() -> None:
    while _held:
        _, stack = _held.popitem()
        stack.close()


def lock_save_dir(save_dir: str) -> None:
    """Take the output lock of ``save_dir`` for this process (once per directory)."""
    from truneg_fairseq.outputs import output_lock

    key = os.path.abspath(save_dir)
    if key in _held:
        return
    stack = contextlib.ExitStack()
    stack.enter_context(output_lock(key, logger.warning))
    if not _held and not getattr(lock_save_dir, "at_exit", False):
        atexit.register(_release_all)
        lock_save_dir.at_exit = True
    _held[key] = stack


def locked_save_dirs() -> None:
    """Install the lock (see the module docstring)."""
    from fairseq import checkpoint_utils
    from fairseq.distributed import utils as distributed_utils

    def locks_the_directory(verify):
        @functools.wraps(verify)
        def verify_checkpoint_directory(save_dir, *args, **kwargs):
            verify(save_dir, *args, **kwargs)
            lock_save_dir(save_dir)

        return verify_checkpoint_directory

    def then_release(call_main):
        @functools.wraps(call_main)
        def call_main_then_release(cfg, main, **kwargs):
            try:
                return call_main(cfg, main, **kwargs)
            finally:
                _release_all()

        return call_main_then_release

    # the lock is taken and released together
    if wrap_once(
        checkpoint_utils,
        "verify_checkpoint_directory",
        locks_the_directory,
        marker="truneg_save_dir_lock",
    ):
        wrap_once(distributed_utils, "call_main", then_release, marker="truneg_save_dir_lock")
