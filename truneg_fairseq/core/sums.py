"""The logging sums of a training loop outside fairseq: the steps' ``logging`` dicts added up on the
device (no host sync in a step) and, at log time, summed over the processes with one all-reduce
and read with one device-to-host copy. torch only (``torch.distributed`` when initialised)."""

from __future__ import annotations

from typing import Dict

import torch


def distributed_world() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


class StatSums:
    """Running sums of the steps' ``logging`` dicts (device tensors and Python numbers)."""

    def __init__(self):
        self.sums: Dict[str, object] = {}

    def add(self, logging: Dict) -> None:
        for k, v in logging.items():
            v = v.detach() if torch.is_tensor(v) else v
            self.sums[k] = self.sums[k] + v if k in self.sums else v

    def __bool__(self) -> bool:
        return bool(self.sums)

    def pop(self, all_processes: bool = True) -> Dict[str, float]:
        """The sums as Python floats (over every process when distributed), and reset."""
        sums, self.sums = self.sums, {}
        if not sums:
            return {}
        keys = sorted(sums)
        device = next((v.device for v in sums.values() if torch.is_tensor(v)), torch.device("cpu"))
        vec = torch.stack(
            [torch.as_tensor(sums[k], dtype=torch.float64, device=device) for k in keys]
        )
        if all_processes and distributed_world() > 1:
            import torch.distributed as dist

            dist.all_reduce(vec)
        return dict(zip(keys, vec.tolist()))  # the one device-to-host copy
