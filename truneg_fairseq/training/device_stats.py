"""Training statistics summed on the device and read once per ``--log-interval``
(``device_statistics``).

fairseq 0.12's ``Trainer._reduce_and_log_stats`` reduces every update's logging outputs into its
meters at once: the criterion's ``reduce_metrics`` turns each summed tensor into a Python number
(``.item()``), the trainer tests ``isfinite(grad_norm)`` and copies two host numbers to the
device for the ``clip`` meter, and it reads every meter of a temporary aggregator back. On a GPU
each of those is a host-device synchronisation: about twenty per update for the plugin's
criterions, so the host waits for the device at every update and cannot queue the next one.

For the criterions that declare ``summed_statistics = True`` (every value they log is a sum
over the update's samples, so a sum over updates reduces to the same meters), training updates
instead add their logging outputs, the finite gradient norms and the clip count into device
tensors. They are read with one copy and handed to the criterion's own ``reduce_metrics`` once
per ``--log-interval``, on the update fairseq logs at, and before anything else reads the
meters (the end of an epoch, a checkpoint's saved meter state). The meters then hold the same
sums and counts as when every update was reduced on its own, so the log, tensorboard and the
checkpoints show the same values. Those meters, and only those: the aggregators active at the
updates (fairseq's default, ``train``, ``train_inner``). A reduction that runs while a validation
reads its meters (a validation between two logs, at the end of an epoch, before a save) does
not add the training sums to the validation's own aggregator. A value logged per update with weight 1 is reduced with the
number of updates as its weight (``updates`` in the summed outputs).

A compiled update (:mod:`.compiled_update`) adds its statistics inside its own graph, into the
device vectors of a :class:`GraphSums` that the reading copies and clears: its updates launch
nothing for them.

Validation, the criterions without the declaration, TPUs and a world of several workers with
BMUF keep fairseq's own per-update reduction.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Mapping
from typing import Dict, List, Optional

import torch

from truneg_fairseq.compat import wrap_once

_PENDING_ATTR = "_truneg_pending_stats"
# ``isfinite(grad_norm)`` of the update being reduced, left by the update that computed it
FINITE_ATTR = "_truneg_grad_norm_finite"
# the GraphSums that already holds the update's one-number statistics and gradient norm
SUMMED_ATTR = "_truneg_summed_in_graph"
_SETTING_ATTR = "_truneg_stats_setting"
_MARKER = "_truneg_device_stats"  # on the wrappers this module installs


class PendingStats:
    """What the updates since the last reduction logged, on the device where it was computed."""

    def __init__(self, aggregators: Dict[str, object], criterion_cls, clip_norm: float):
        # the fairseq metric aggregators active at the updates (name -> MetersDict): the only
        # ones the sums reach, whatever is active when they are reduced (a validation's own)
        self.aggregators = aggregators
        self.criterion_cls = criterion_cls
        self.clip_norm = clip_norm
        self.sums: Dict[str, object] = {}  # host numbers (and any tensor of several elements)
        # the one-number tensors of a logging output, one vector per (device, dtype, keys): a
        # stack and an add an update instead of an add per value
        self.vectors: Dict[tuple, torch.Tensor] = {}
        self.updates = 0
        # [sum of the finite norms, how many were finite, sum of 100 x clipped]; the first
        # update with a non-finite norm (inf while there is none)
        self.gnorm = self.first_bad = None
        self.graphs: List[GraphSums] = []  # where compiled updates added theirs

    def add(self, logging_outputs, grad_norm, update: int, finite=None, summed=None) -> None:
        """Add update number ``update``'s logging outputs and gradient norm (``finite``:
        ``isfinite(grad_norm)`` where the update already has it; ``summed``: the
        :class:`GraphSums` that already added the norm and the values of its keys)."""
        skip = ()
        if summed is not None:
            if not any(g is summed for g in self.graphs):
                self.graphs.append(summed)
            skip, grad_norm = summed.keys, None
        for log in logging_outputs:
            groups: Dict[tuple, list] = {}
            for key, value in log.items():
                if key in skip:
                    continue
                if torch.is_tensor(value) and value.numel() == 1:
                    groups.setdefault((value.device, value.dtype), []).append(key)
                    continue
                if torch.is_tensor(value):
                    value = value.detach()
                previous = self.sums.get(key)
                if previous is not None:
                    value = previous + value
                elif torch.is_tensor(value):
                    value = value.clone()  # a compiled update overwrites its outputs
                self.sums[key] = value
            for kind, keys in groups.items():
                # a new tensor (never a compiled update's output itself), then summed in place
                vector = torch.stack([log[k].detach().reshape(()) for k in keys])
                layout = (*kind, tuple(keys))
                previous = self.vectors.get(layout)
                self.vectors[layout] = vector if previous is None else previous.add_(vector)
        self.updates += 1
        if grad_norm is None:
            return
        g = grad_norm.detach().float() if torch.is_tensor(grad_norm) else torch.tensor(grad_norm)
        if finite is None:
            finite = torch.isfinite(g)
        value = torch.where(finite, g, 0.0)
        stats = torch.stack([value, finite.to(g.dtype), (value > self.clip_norm) * 100.0])
        bad = torch.where(finite, float("inf"), float(update))
        if self.gnorm is None:
            self.gnorm, self.first_bad = stats, bad
        else:
            self.gnorm.add_(stats)
            self.first_bad = torch.minimum(self.first_bad, bad)

    def to_host(self) -> Dict[str, float]:
        """Every pending value as a Python number, the device tensors read in one copy."""
        host: Dict[str, float] = {}
        tensor_keys = []
        parts = []
        for key, value in self.sums.items():
            if torch.is_tensor(value):
                tensor_keys.append([key])
                parts.append(value.reshape(1))
            else:
                host[key] = value
        for (_, _, keys), vector in self.vectors.items():
            tensor_keys.append(list(keys))
            parts.append(vector)
        firsts = 0
        if self.gnorm is not None:
            tensor_keys.append(list(GraphSums.NORM_KEYS))
            parts.extend([self.gnorm])
            firsts += 1
        graphs = [g for g in self.graphs if g.pending]
        for graph in graphs:
            keys, sums, _ = graph.parts()
            tensor_keys.append(keys)
            parts.append(sums)
        # the first non-finite update of each source, last (their minimum is read)
        parts.extend([self.first_bad.reshape(1)] if firsts else [])
        parts.extend(graph.parts()[2] for graph in graphs)
        firsts += len(graphs)
        if parts:
            device = parts[0].device
            flat = torch.cat([t.to(device=device, dtype=torch.float64) for t in parts])
            values = flat.cpu().tolist()  # the one read of the interval
            for graph in graphs:  # (after the copy: the next replay adds into cleared sums)
                graph.clear()
            read = iter(values[: len(values) - firsts])
            for keys in tensor_keys:
                for key in keys:
                    host[key] = host.get(key, 0.0) + next(read)
            if firsts:
                first = min(values[len(values) - firsts :])
                host["_first_bad"] = 0.0 if first == float("inf") else first
        return host


class GraphSums:
    """The statistics of a compiled update, added up inside its graph (:meth:`add`, called while
    the graph is traced): device tensors made once and updated in place, static addresses, so
    that a replayed CUDA graph writes where the last replay did. :class:`PendingStats` copies
    them out with the rest of the interval and clears them.

    ``sums`` holds the finite gradient norms' sum, how many were finite, 100 x how many were
    clipped, then the logging output's one-number values in the order of ``keys`` (what the
    graph returned); ``first_bad`` the first update with a non-finite norm (inf while there is
    none); ``update`` the number of the update the graph runs, counted by the graph (the host
    sets it only when updates ran outside the graph)."""

    CAPACITY = 256  # values of a logging output, the three of the gradient norm included
    NORM_KEYS = ("_gnorm_sum", "_gnorm_count", "_clip_sum")

    def __init__(self, device, clip_norm: float):
        f64 = dict(dtype=torch.float64, device=device)
        self.clip_norm = float(clip_norm)
        self.sums = torch.zeros(self.CAPACITY, **f64)
        self.first_bad = torch.full((1,), float("inf"), **f64)
        self.update = torch.zeros((1,), **f64)
        for tensor in (self.sums, self.first_bad, self.update):
            torch._dynamo.mark_static_address(tensor)
        self.keys: Optional[tuple] = None
        self._next_update: Optional[int] = None
        self.pending = False  # whether anything was added since the last read

    def begin(self, num_updates: int) -> None:
        """Before a replay of the update numbered ``num_updates`` (from 0)."""
        if self._next_update != num_updates:
            self.update.fill_(float(num_updates))
        self._next_update = num_updates + 1

    def took(self, keys: tuple) -> None:
        """After a replay: the keys of the values it added (those of every replay of the run)."""
        if self.keys is None:
            self.keys = keys
        elif keys != self.keys:
            raise RuntimeError(
                f"the compiled update's statistics changed from {list(self.keys)} to {list(keys)} "
                "within one run; train without the compiled update (--electra-compile-scope / "
                "--batch-mlm-compile-scope model)"
            )
        self.pending = True

    def add(self, values, grad_norm, finite) -> None:
        """Inside the graph: add one update's ``values`` (0-dim tensors, or a float64 vector) and
        its gradient norm (``finite``: whether it is)."""
        g = grad_norm.detach().to(torch.float64)
        norm = torch.where(finite, g, torch.zeros_like(g))
        clipped = (norm > self.clip_norm).to(torch.float64) * 100.0
        head = torch.stack([norm, finite.to(torch.float64), clipped])
        if isinstance(values, (list, tuple)):
            values = [v.detach().reshape(1).to(torch.float64) for v in values]
        else:
            values = [values.detach().to(torch.float64)]
        vector = torch.cat([head, *values])
        if vector.numel() > self.CAPACITY:
            raise ValueError(
                f"a logging output of {vector.numel() - 3} values: the compiled update sums at "
                f"most {self.CAPACITY - 3}"
            )
        self.sums[: vector.numel()].add_(vector)
        self.update.add_(1.0)
        bad = torch.where(finite, torch.full_like(self.update, float("inf")), self.update)
        self.first_bad.copy_(torch.minimum(self.first_bad, bad))

    def parts(self):
        """(keys, one float64 vector of their sums, first bad update) to read."""
        keys = [*self.NORM_KEYS, *(self.keys or ())]
        return keys, self.sums[: len(keys)], self.first_bad

    def clear(self) -> None:
        self.sums.zero_()
        self.first_bad.fill_(float("inf"))
        self.pending = False


class UpdateStats(Mapping):
    """What fairseq's ``Trainer.train_step`` returns for an update (the update's reduced
    statistics: ``loss``, ..., ``sample_size``), reduced only when something reads it: fairseq-train
    itself only tests it against None, so an update that nobody reads costs no sync."""

    def __init__(self, trainer, logging_outputs, sample_size):
        self._source = (trainer, logging_outputs, sample_size)
        self._values: Optional[Dict[str, object]] = None

    def _read(self) -> Dict[str, object]:
        if self._values is None:
            from fairseq.logging import metrics

            trainer, logging_outputs, sample_size = self._source
            with metrics.aggregate(new_root=True) as agg:  # the real meters are left alone
                trainer.task.reduce_metrics(logging_outputs, trainer.get_criterion())
                values = agg.get_smoothed_values()
            for key in ("ppl", "wps", "wpb", "bsz"):  # as fairseq's trainer leaves them out
                values.pop(key, None)
            values["sample_size"] = sample_size
            self._values, self._source = dict(values), None
        return self._values

    def __getitem__(self, key):
        return self._read()[key]

    def __iter__(self):
        return iter(self._read())

    def __len__(self):
        return len(self._read())


@contextlib.contextmanager
def _only_aggregators(aggregators: Dict[str, object]):
    """Make ``aggregators`` (name -> MetersDict) fairseq's active aggregators, and only them, for
    the body; what was active before is active again after it. A reduction runs when something
    reads the meters: inside a validation that is the validation's own new root (its temporary
    aggregator), and entering the training aggregators on top of it, as a nested
    ``metrics.aggregate`` does, would add the training sums to the valid meters too."""
    from fairseq.logging import metrics

    active, counts = metrics._active_aggregators, metrics._active_aggregators_cnt
    saved, saved_counts = active.copy(), counts.copy()
    active.clear()
    counts.clear()
    active.update(aggregators)
    counts.update({name: 1 for name in aggregators})
    try:
        yield
    finally:
        active.clear()
        counts.clear()
        active.update(saved)
        counts.update(saved_counts)


def _reduce(pending: PendingStats) -> None:
    """Hand ``pending`` to fairseq's meters in the aggregators its updates were logged in."""
    from fairseq.logging import metrics

    host = pending.to_host()
    gnorm_sum = host.pop("_gnorm_sum", None)
    gnorm_count = host.pop("_gnorm_count", 0.0)
    clip_sum = host.pop("_clip_sum", 0.0)
    first_bad = int(host.pop("_first_bad", 0.0))
    host["updates"] = pending.updates
    with _only_aggregators(pending.aggregators):
        if gnorm_sum is not None and gnorm_count > 0:
            metrics.log_speed("ups", gnorm_count, priority=100, round=2)
            metrics.log_scalar("gnorm", gnorm_sum / gnorm_count, gnorm_count, priority=400, round=3)
            if pending.clip_norm > 0:
                metrics.log_scalar(
                    "clip", clip_sum / gnorm_count, gnorm_count, priority=500, round=1
                )
        # fairseq's task-level meters (FairseqTask.reduce_metrics): words and sentences per
        # update, weighted by the number of updates, and the words per second
        updates = pending.updates
        if "ntokens" in host:
            metrics.log_scalar("wpb", host["ntokens"] / updates, updates, priority=180, round=1)
            metrics.log_speed("wps", host["ntokens"], priority=90, round=1)
        if "nsentences" in host:
            metrics.log_scalar("bsz", host["nsentences"] / updates, updates, priority=190, round=1)
        pending.criterion_cls.reduce_metrics([host])
    if first_bad:
        # fairseq's update raises this at once; an update that does not wait for the device
        # skipped the optimizer step of every such update and says so here
        bad = pending.updates - int(gnorm_count)
        raise FloatingPointError(
            f"gradients are Nan/Inf: {bad} of the last {pending.updates} updates, the first at "
            f"update {first_bad} (their optimizer steps were skipped; the weights are those "
            "before them)"
        )


def flush(trainer) -> None:
    """Reduce what ``trainer``'s updates left on the device (nothing when nothing is pending)."""
    pending: Optional[PendingStats] = getattr(trainer, _PENDING_ATTR, None)
    if pending is not None and pending.updates:
        setattr(trainer, _PENDING_ATTR, None)
        _reduce(pending)


_live_trainers: "weakref.WeakSet" = weakref.WeakSet()


def flush_all() -> None:
    for trainer in list(_live_trainers):
        flush(trainer)


def defers(trainer) -> bool:
    """Whether ``trainer``'s training statistics are summed on the device (module docstring)."""
    from fairseq.tasks import FairseqTask

    criterion = trainer.get_criterion()
    return (
        getattr(type(criterion), "summed_statistics", False)
        and type(trainer.task).reduce_metrics is FairseqTask.reduce_metrics
        and not trainer.tpu
        and not trainer.cfg.optimization.use_bmuf
    )


def device_statistics() -> None:
    """Install the deferred reduction on fairseq's ``Trainer`` and the flushes before every read
    of the meters (idempotent)."""
    from fairseq import trainer as trainer_module
    from fairseq.logging import metrics

    Trainer = trainer_module.Trainer

    def deferred(reduce_and_log):
        def _reduce_and_log_stats(self, logging_outputs, sample_size, grad_norm=None):
            setting = self.__dict__.get(_SETTING_ATTR)
            if setting is None:  # read once: the criterion and the config do not change
                setting = self.__dict__[_SETTING_ATTR] = (
                    defers(self),
                    self.cfg.common.log_interval,
                )
            finite = self.__dict__.pop(FINITE_ATTR, None)
            summed = self.__dict__.pop(SUMMED_ATTR, None)
            if grad_norm is None or logging_outputs is None or not setting[0]:
                flush(self)  # validation and anything else: what came before is reduced first
                return reduce_and_log(self, logging_outputs, sample_size, grad_norm)
            pending = getattr(self, _PENDING_ATTR, None)
            if pending is None:
                pending = PendingStats(
                    dict(metrics._active_aggregators),
                    type(self.get_criterion()),
                    float(self.cfg.optimization.clip_norm),
                )
                setattr(self, _PENDING_ATTR, pending)
                _live_trainers.add(self)
            update = self.get_num_updates()
            pending.add(logging_outputs, grad_norm, update, finite, summed)
            # fairseq-train reads the interval's meters right after the update it logs at
            if update % setting[1] == 0:
                flush(self)
            return UpdateStats(self, logging_outputs, sample_size)

        return _reduce_and_log_stats

    def flushed_first(save_checkpoint):
        @functools.wraps(save_checkpoint)
        def flushed_save_checkpoint(self, filename, extra_state):
            flush(self)  # the saved meters hold every update
            return save_checkpoint(self, filename, extra_state)

        return flushed_save_checkpoint

    def flushed_read(read):
        def flushed(*args, **kwargs):
            flush_all()
            return read(*args, **kwargs)

        return flushed

    # the reduction, the save and the reads of the meters are replaced together
    if not wrap_once(Trainer, "_reduce_and_log_stats", deferred, marker=_MARKER):
        return
    wrap_once(Trainer, "save_checkpoint", flushed_first, marker=_MARKER)
    for name in ("get_smoothed_values", "get_smoothed_value", "get_meter", "get_meters"):
        wrap_once(metrics, name, flushed_read, marker=_MARKER)
