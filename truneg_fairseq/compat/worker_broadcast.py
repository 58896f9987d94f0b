"""Objects sent between the workers of one job (``trusted_worker_broadcast``): with several
workers, fairseq loads a checkpoint on rank 0 only (through the allow-list of
``checkpoint_globals``) and sends it to the others with ``distributed_utils.broadcast_object``,
whose receiving side calls ``torch.load`` on the bytes. Under weights-only loading that refuses
the checkpoint's ``omegaconf.DictConfig`` (fairseq converts the saved ``args`` to one after
loading), so every rank but 0 dies on resume and on ``--restore-file``. These bytes are not a
file from outside: rank 0 of the same job pickled them from objects it holds, so the shim sends
them with ``torch.distributed.broadcast_object_list`` (plain pickle both ways). Files on disk
keep the weights-only load and its allow-list.

Upstream: the same weights-only default as fairseq issue #5610, met in
``distributed_utils.broadcast_object``; no fix released.
"""

from __future__ import annotations

import torch

from .wrapping import wrap_once


def trusted_worker_broadcast() -> None:
    """Send fairseq's inter-worker objects with torch's own object broadcast (see the module
    docstring). fairseq looks ``_broadcast_object_slow`` up at each call, so replacing the
    module attribute is enough; the tensors of the object still go through fairseq's tensor
    broadcast."""
    from fairseq.distributed import utils as distributed_utils

    def with_object_broadcast(original):  # replaces it: nothing of it is called
        def broadcast_object_slow(obj, src_rank: int, group, dist_device):
            box = [obj]
            torch.distributed.broadcast_object_list(
                box, src=src_rank, group=group, device=dist_device
            )
            return box[0]

        return broadcast_object_slow

    wrap_once(
        distributed_utils, "_broadcast_object_slow", with_object_broadcast, marker="truneg_trusted"
    )
