"""One worker of a hand-launched multi-process fairseq-train job on the CPU (tests only).

    python tests/cpu_worker.py DATA ... --cpu --distributed-world-size 2 --distributed-rank R \\
        --distributed-no-spawn --distributed-init-method tcp://127.0.0.1:PORT --distributed-backend gloo

is fairseq-train itself with one call wrapped: fairseq 0.12 builds torch's DistributedDataParallel
(``--ddp-backend pytorch_ddp``/``c10d``) with ``device_ids=[0]`` even under ``--cpu``, which torch
refuses for a CPU module, so the wrapper drops the device ids for CPU modules (on GPUs nothing
changes). With ``TRUNEG_DUMP_PARAMS=FILE`` the worker's parameters are saved to FILE when it
exits, so that tests can compare ranks (fairseq saves checkpoints on rank 0 only).
"""

import atexit
import os

import fairseq.models.distributed_fairseq_model as distributed_fairseq_model
import torch
from torch.nn.parallel import DistributedDataParallel

_wrapped = []


class CpuDistributedDataParallel(DistributedDataParallel):
    def __init__(self, module, device_ids=None, output_device=None, **kwargs):
        if next(module.parameters()).device.type == "cpu":
            device_ids = output_device = None
        super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)
        _wrapped.append(self)


def _dump(path):
    if _wrapped:
        torch.save(
            {k: v.detach().clone() for k, v in _wrapped[-1].module.state_dict().items()}, path
        )


if __name__ == "__main__":
    distributed_fairseq_model.DistributedDataParallel = CpuDistributedDataParallel
    if os.environ.get("TRUNEG_DUMP_PARAMS"):
        atexit.register(_dump, os.environ["TRUNEG_DUMP_PARAMS"])
    from fairseq_cli.train import cli_main

    cli_main()
