"""A finished run started again does nothing (``finished_run_does_nothing``).

fairseq 0.12's ``fairseq-train`` checks ``--max-update`` only after an update: the same command
run again on a save directory whose ``checkpoint_last.pt`` already holds ``--max-update``
updates trains one more ("Stopping training due to num_updates: 13 >= max_update: 12"),
validates and overwrites ``checkpoint_last.pt`` (and possibly ``checkpoint_best.pt``) with a run
that is no longer the one it reported. With the mend, once the checkpoint is loaded and holds
at least ``--max-update`` updates, fairseq-train says the run is finished, names the checkpoint
and how to go on, and exits with status 0 before anything is trained, validated or written, as
``truneg-hf-train`` does on a finished output directory. Every worker loads the same checkpoint
and so stops the same way. A run ended by ``--max-epoch`` already does nothing in fairseq.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import functools
import logging
import os

from .wrapping import wrap_once

logger = logging.getLogger(__name__)


def _loaded_file(cfg, trainer) -> str:
    """The checkpoint fairseq's ``load_checkpoint`` reads for ``cfg`` (a CheckpointConfig)."""
    if cfg.restore_file == "checkpoint_last.pt":
        suffix = getattr(trainer, "checkpoint_suffix", "") or ""
        return os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
    return cfg.restore_file


def finished_run_does_nothing() -> None:
    """Wrap ``fairseq.checkpoint_utils.load_checkpoint`` (fairseq-train and fairseq-hydra-train
    call it on the module) so that a run already at ``--max-update`` ends there."""
    from fairseq import checkpoint_utils

    def stops_when_finished(original):
        @functools.wraps(original)
        def load_checkpoint(cfg, trainer, **passthrough_args):
            extra_state, epoch_itr = original(cfg, trainer, **passthrough_args)
            max_update = int(trainer.cfg.optimization.max_update or 0)
            done = trainer.get_num_updates()
            if max_update > 0 and done >= max_update:
                logger.info(
                    f"the run is finished: {_loaded_file(cfg, trainer)} holds {done} updates and "
                    f"--max-update is {max_update}; nothing was trained and no file was written "
                    "(give a larger --max-update to train on, or a new --save-dir to start again)"
                )
                raise SystemExit(0)
            return extra_state, epoch_itr

        return load_checkpoint

    wrap_once(
        checkpoint_utils, "load_checkpoint", stops_when_finished, marker="_truneg_finished_run"
    )
