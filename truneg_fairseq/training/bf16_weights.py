"""bf16 compute copies of the linear layers' weights for a training update under bf16 autocast.

Under ``torch.autocast(bfloat16)`` with fp32 weights, every linear layer casts its weight and
bias to bf16 in the forward pass, and autograd casts their bf16 gradients back to fp32 in the
backward pass: two kernels per tensor per update, 688 of ELECTRA-small's 2,084 eager kernels
(``benchmarks/step_counts.py --bf16 --top 5``), each a launch the host pays for on a GPU.

:class:`Bf16ComputeWeights` instead keeps one bf16 copy of each such tensor, made from the fp32
weight with one ``foreach`` copy at the start of an update, and runs the update's forward and
backward with the copies in the layers' places (autocast leaves a tensor that already is bf16
alone), then moves their bf16 gradients into fp32 gradients of the fp32 weights with one
``foreach`` copy (or add, for the second and later sub-batches of ``--update-freq``), so that
clipping, the optimizer and everything else see fp32 weights and gradients as before. The
numbers are the same as autocast's: the copy is the bf16 rounding autocast makes, the bf16
gradient is the one autocast's backward would cast, and sub-batches accumulate in fp32.

Only ``nn.Linear`` layers, and only their own tensors: a weight shared with another module (a
tied embedding) is not copied, nor a layer marked ``truneg_fp32 = True`` (one that runs in fp32
outside autocast). The weights stay in the model between updates (validation, checkpoints,
conversion and export see fp32 weights only). It is used by the update that never waits
(:mod:`.fast_update`) with an eager model (not ``--electra-compile``, where inductor fuses the
casts). With several workers, torch's DDP never sees the copies' gradients (its hooks sit on
the fp32 weights): that update then sums the gradients itself (:mod:`.worker_grads`).

A weight that an update uses in several passes adds their bf16 gradients on its copy; autocast
does the same where one cast serves them all, but adds in fp32 where it casts the weight again
(its cast cache holds within one autocast region): ``mlm_sent_kl``, whose forward runs the
generator on three inputs, agrees with autocast to bf16 rounding, the other objectives to the
bit.
"""

from __future__ import annotations

from typing import List, Optional

import torch
from torch import nn

# where a layer that joins its q, k and v projections for one matrix product
# (models/encoder_layer.py) finds their bf16 copies, already joined: (weight, bias or None), or
# None when it joins the fp32 weights itself
JOINED_ATTR = "truneg_joined_qkv"
_QKV = ("q_proj", "k_proj", "v_proj")


class Bf16ComputeWeights:
    """The bf16 copies of ``model``'s linear layers (module docstring). A layer with the
    attribute :data:`JOINED_ATTR` gets its q, k and v projections' copies as one joined tensor
    (and one joined bias): no concatenation in its forward, one gradient for the three."""

    def __init__(self, model: nn.Module):
        owners = {}
        for module in model.modules():
            for name, param in module._parameters.items():
                if param is not None:
                    owners.setdefault(id(param), []).append((module, name))

        def copyable(param) -> bool:
            return (
                param is not None
                and param.requires_grad
                and param.dtype == torch.float32
                and len(owners[id(param)]) == 1
            )

        self.weights: List[torch.Tensor] = []  # the fp32 tensors copied
        self.targets: List[torch.Tensor] = []  # where their copies live (a leaf, or a view of one)
        self.leaves: List[torch.Tensor] = []  # the bf16 tensors the backward gives gradients
        self.rows: List[Optional[List[int]]] = []  # per leaf: None, or its parts' first dims
        self.joined: List[tuple] = []  # (layer, (weight leaf, bias leaf or None))
        done = set()
        for layer in model.modules():
            if not hasattr(layer, JOINED_ATTR):
                continue
            projections = [getattr(getattr(layer, "self_attn", None), n, None) for n in _QKV]
            if not all(
                isinstance(m, nn.Linear) and not getattr(m, "truneg_fp32", False)
                for m in projections
            ):
                continue
            weights = [m.weight for m in projections]
            biases = [m.bias for m in projections]
            if not all(copyable(w) for w in weights) or not (
                all(b is None for b in biases) or all(copyable(b) for b in biases)
            ):
                continue
            parts = [weights] + ([biases] if biases[0] is not None else [])
            joined = []
            for tensors in parts:
                leaf = torch.empty(
                    (sum(t.shape[0] for t in tensors), *tensors[0].shape[1:]),
                    dtype=torch.bfloat16,
                    device=tensors[0].device,
                ).requires_grad_()
                rows = [t.shape[0] for t in tensors]
                with torch.no_grad():
                    self.targets.extend(leaf.detach().split_with_sizes(rows))
                self.weights.extend(tensors)
                self.leaves.append(leaf)
                self.rows.append(rows)
                joined.append(leaf)
                done.update(id(t) for t in tensors)
            self.joined.append((layer, (joined[0], joined[1] if len(joined) > 1 else None)))
        slots: List[tuple] = []
        for module in model.modules():
            if not isinstance(module, nn.Linear) or getattr(module, "truneg_fp32", False):
                continue
            for name in ("weight", "bias"):
                param = module._parameters.get(name)
                if copyable(param) and id(param) not in done:
                    slots.append((module._parameters, name, param))
                    leaf = torch.empty_like(param, dtype=torch.bfloat16).requires_grad_()
                    self.weights.append(param)
                    self.targets.append(leaf.detach())
                    self.leaves.append(leaf)
                    self.rows.append(None)
        self.slots = slots
        self.copies = [leaf for leaf, rows in zip(self.leaves, self.rows) if rows is None]
        self.accumulated = False

    def __len__(self) -> int:
        return len(self.weights)

    def begin(self) -> None:
        """Copy the fp32 weights (as they are now: loaded, updated or not) into the bf16 copies
        and put the copies in the layers' places."""
        with torch.no_grad():
            torch._foreach_copy_(self.targets, self.weights)
        for (params, name, _), copy in zip(self.slots, self.copies):
            params[name] = copy
        for layer, leaves in self.joined:  # a plain attribute: no nn.Module.__setattr__ call
            layer.__dict__[JOINED_ATTR] = leaves
        self.accumulated = False

    def collect(self) -> None:
        """After a sub-batch's backward: its bf16 gradients into the fp32 weights' gradients
        (copied for the first sub-batch of the update, added for the others)."""
        grads: List[Optional[torch.Tensor]] = []
        for leaf, rows in zip(self.leaves, self.rows):
            grad, leaf.grad = leaf.grad, None
            if rows is None:
                grads.append(grad)
            elif grad is None:
                grads.extend([None] * len(rows))
            else:
                grads.extend(grad.split_with_sizes(rows))  # (an operator: no Python call)
        pairs = [(w, g) for w, g in zip(self.weights, grads) if g is not None]
        if not pairs:
            return
        if not self.accumulated:
            for w, _ in pairs:
                w.grad = torch.empty_like(w)
            with torch.no_grad():
                torch._foreach_copy_([w.grad for w, _ in pairs], [g for _, g in pairs])
            self.accumulated = True
        else:
            for w, _ in pairs:
                if w.grad is None:
                    w.grad = torch.zeros_like(w)
            # widened first: CUDA's foreach add of two dtypes takes a kernel per tensor, its
            # foreach copy of two dtypes does not
            wide = [torch.empty_like(w) for w, _ in pairs]
            with torch.no_grad():
                torch._foreach_copy_(wide, [g for _, g in pairs])
                torch._foreach_add_([w.grad for w, _ in pairs], wide)

    def end(self) -> None:
        """The fp32 weights back in the layers' places (also after an error)."""
        for params, name, weight in self.slots:
            params[name] = weight
        for layer, _ in self.joined:
            layer.__dict__[JOINED_ATTR] = None
        for leaf in self.leaves:
            leaf.grad = None
