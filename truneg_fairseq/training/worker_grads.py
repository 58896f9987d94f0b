"""The gradients (and statistics) of several workers summed by the update itself.

torch's ``DistributedDataParallel`` all-reduces a gradient from a hook on the parameter's
gradient accumulation. Where the update computes a weight's gradient somewhere else, the hook
never fires: under bf16 autocast the linear layers run on bf16 copies of their weights
(:mod:`.bf16_weights`) whose gradients are moved into the fp32 ones after the backward, and the
compiled update (:mod:`.compiled_update`) runs the model without its DDP wrapper. Those updates
run every backward under the wrapper's ``no_sync`` (or not through it at all) and sum the
gradients here, after the last backward: one flat all-reduce per bucket of gradients of one
dtype, on the device, without a wait on the host. fairseq's ``legacy_ddp`` already works this
way (its ``all_reduce_grads`` after the backward) and keeps its own.

The sum is not divided by the number of workers (torch's DDP averages): the update divides by
the summed sample size alone.

The update's logging outputs and sample size are summed the same way, one float64 vector an
update (:func:`all_reduce_statistics`; the compiled update sums them inside its graph).

The gradients summed are those the backward made (a parameter the loss does not reach has
none, and keeps none, as with one worker); which ones those are depends on the model and
criterion, not on the batch's values, so it is the same on every worker.
"""

from __future__ import annotations

from typing import List

import torch

# elements of one flat all-reduce (256 MiB of fp32): the copy the buckets take stays bounded
BUCKET_ELEMENTS = 1 << 26


def sums_gradients_itself(model) -> bool:
    """Whether ``model``'s wrapper leaves the all-reduce of the gradients to the update (torch's
    DDP, whose hooks fire only on gradients the backward accumulates into the weights), as
    opposed to one with its own ``all_reduce_grads`` after the backward (fairseq's legacy DDP)."""
    return not hasattr(model, "all_reduce_grads")


def buckets(tensors: List[torch.Tensor], limit: int = BUCKET_ELEMENTS) -> List[List[int]]:
    """``tensors``' indices in runs of one device and dtype of at most ``limit`` elements (one
    tensor over the limit is a run of its own)."""
    runs: List[List[int]] = []
    key, size = None, 0
    for i, t in enumerate(tensors):
        k = (t.device, t.dtype)
        if not runs or k != key or size + t.numel() > limit:
            runs.append([])
            key, size = k, 0
        runs[-1].append(i)
        size += t.numel()
    return runs


def all_reduce_gradients(params, group) -> None:
    """Sum the gradients of ``params`` over the workers of ``group`` in place."""
    from fairseq.distributed import utils as distributed_utils

    grads = [p.grad for p in params if p.grad is not None]
    for run in buckets(grads):
        part = [grads[i] for i in run]
        flat = torch.cat([g.reshape(-1) for g in part])
        distributed_utils.all_reduce(flat, group)
        views = [v.view_as(g) for v, g in zip(flat.split([g.numel() for g in part]), part)]
        torch._foreach_copy_(part, views)


def all_reduce_statistics(logging_outputs, sample_size, is_dummy: bool, device, group):
    """An update's logging outputs summed over its sub-batches and all workers (one logging
    output, every value a one-element tensor on ``device``) and the total sample size, with one
    float64 all-reduce and no wait for the device (the numbers the host holds, such as
    ``ntokens``, join the vector through pinned memory)."""
    from fairseq.distributed import utils as distributed_utils

    keys: list = []
    summed: dict = {}
    for log in logging_outputs:
        for key, value in log.items():
            if key in summed:
                summed[key] = summed[key] + value
            else:
                keys.append(key)
                summed[key] = value
    keys.append(None)  # the sample size's place
    summed[None] = sample_size
    on_device = [k for k in keys if torch.is_tensor(summed[k])]
    on_host = [k for k in keys if not torch.is_tensor(summed[k])]
    parts = []
    if on_device:
        parts.append(
            torch.cat([summed[k].detach().reshape(1) for k in on_device]).to(
                device=device, dtype=torch.float64
            )
        )
    if on_host:
        host = torch.tensor([float(summed[k]) for k in on_host], dtype=torch.float64)
        if device.type == "cuda":  # a copy from pinned memory does not wait for the device
            host = host.pin_memory().to(device, non_blocking=True)
        parts.append(host)
    vector = parts[0] if len(parts) == 1 else torch.cat(parts)
    if is_dummy:  # fairseq's update counts nothing of a dummy batch
        vector = vector * 0.0
    distributed_utils.all_reduce(vector, group)
    values = dict(zip(on_device + on_host, vector.unbind()))
    total = values.pop(None)
    return [{k: values[k] for k in keys if k is not None}], total
