"""What one training update asks of the host, counted on any machine (no GPU needed).

For each recipe configuration (ELECTRA-small's structure and RoBERTa-base's at tiny widths: the
counts depend on the structure, not the widths), one update through fairseq's own
``Trainer.train_step`` with the recipes' fast flags (static prediction slots, fused AdamW,
clipping, log interval 50), measured after two warm-up updates:

* kernels: the aten operators that launch work on a device (views, allocations and profiler
  markers left out), forward, backward and optimizer together, as a ``TorchDispatchMode`` sees
  them;
* syncs: the operators that make the host wait for a device value (``.item()``, ``bool()``,
  ``nonzero``), each with the first line of fairseq or of this package that asked for it;
* Python calls: Python function calls in the update, and those in the Trainer around the step
  (the update less the criterion's forward and the backward);
* graphs: how many graphs dynamo makes of the criterion's forward + the backward
  (``torch._dynamo.explain``; 1 means ``fullgraph=True`` compiles it);
* with ``--compiled``: the same update as the recipes' COMPILE=update, compiled as one graph by
  inductor (code for this CPU): the Python calls of the update (the graph is one call into
  generated code), the kernels inductor generated, dynamo's graph count;
* with ``--time N``: the median wall time of N more updates. At these widths the kernels' own
  work is tiny, so it is mostly what the host spends on the update (Python, dispatch, the
  operators' CPU bodies): a proxy for the host time a GPU update needs to queue its kernels.

    python benchmarks/step_counts.py                       # every configuration
    python benchmarks/step_counts.py --only electra --no-graphs

On the CPU the counts are those of the CPU's operator paths (one dropout is three operators
there, one on CUDA): compare counts of one machine kind with each other.
"""

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
import traceback

import gpu_step
import torch
from _common import make_batches
from torch.utils._python_dispatch import TorchDispatchMode

CONFIGS = {
    "electra": ("electra-structure", "electra"),
    "electra_hc": ("electra-structure", "mlm_hard_correction"),
    "electra_sr": ("electra-structure", "mlm_soft_reg"),
    "electra_kl": ("electra-structure", "mlm_sent_kl"),
    "roberta_hc": ("roberta-structure", "mlm_hard_correction"),
    "roberta_sr": ("roberta-structure", "mlm_soft_reg"),
    "roberta_kl": ("roberta-structure", "mlm_sent_kl"),
}
SYNC_OPS = {"_local_scalar_dense", "nonzero", "is_nonzero", "item"}
ALLOC_OPS = {
    "empty",
    "empty_strided",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full",
    "scalar_tensor",
}
# operators that launch nothing on a device: a new view of the same storage that the dispatcher
# does not mark as a view, and the profiler's range markers
NO_LAUNCH_OPS = {"_unsafe_view", "detach", "_record_function_enter_new", "_record_function_exit"}


def _register_structures(layers_override=None):
    """ELECTRA-small's and RoBERTa-base's layers and heads at tiny widths, batch 2 x 16."""
    e, _, layers, heads, _, _, gheads, _, _, _ = gpu_step.SIZES["small"]
    layers = layers_override or layers
    gpu_step.SIZES["electra-structure"] = (
        16, 16 * heads, layers, heads, 32 * heads, 16 * gheads, gheads, 32 * gheads, 2, 16,
    )  # fmt: skip
    _, layers, heads, _, _, _ = gpu_step.ROBERTA_SIZES["roberta-base"]
    layers = layers_override or layers
    gpu_step.ROBERTA_SIZES["roberta-structure"] = (16 * heads, layers, heads, 32 * heads, 2, 16)


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.kernels = 0
        self.ops = collections.Counter()
        self.syncs = collections.Counter()
        self.cpu_optimizer = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in SYNC_OPS:
            stack = traceback.extract_stack()[:-1]
            if any("torch/optim/" in f.filename.replace(os.sep, "/") for f in stack):
                # torch's CPU AdamW reads each parameter's step count on the host; the fused
                # CUDA kernel the recipes use keeps it on the device
                self.cpu_optimizer += 1
            else:
                self.syncs[_asker(stack)] += 1
        elif not func.is_view and name not in ALLOC_OPS and name not in NO_LAUNCH_OPS:
            self.kernels += 1
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def _asker(stack) -> str:
    """The innermost line of fairseq or of this package on ``stack``."""
    for frame in reversed(stack):
        path = frame.filename.replace(os.sep, "/")
        for root in ("truneg_fairseq/", "fairseq/"):
            if root in path:
                return f"{root}{path.split(root, 1)[1]}:{frame.lineno} {frame.name}"
    return "elsewhere"


def build(size, criterion, work, log_interval, fused_attention=False, bf16=False, compiled=False):
    """fairseq's Trainer with the recipes' fast flags, over a dictionary-only data directory
    (``compiled``: the recipes' COMPILE=update)."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    import truneg_fairseq  # noqa: F401  (registration, mends)

    table = gpu_step.prepare_work(size, work)
    argv = [os.path.dirname(table), *gpu_step._model_args(size, criterion, "static", table)]
    if fused_attention:  # SDPA's fused CPU kernel takes no dropout; CUDA's flash kernel does
        argv += ["--attention-dropout" if "roberta" in size else "--electra-attention-dropout", "0"]
    if bf16:  # the recipes' precision: fp32 weights, the forward under bf16 autocast
        argv += ["--bf16"]
    if compiled and "roberta" in size:  # examples/mlm/pretrain.sh COMPILE=update
        argv[argv.index("masked_lm")] = "batch_masked_lm"
        argv += ["--batch-mlm-compile", "--batch-mlm-compile-scope", "update"]
        argv += ["--batch-size", str(gpu_step.batch_shape(size)[0])]
    elif compiled:  # examples/electra/pretrain.sh COMPILE=update
        argv += ["--electra-compile", "--electra-compile-scope", "update"]
    argv += [
        "--cpu", "--optimizer", "fused_adamw", "--clip-norm", "1.0", "--lr", "5e-4",
        "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10",
        "--total-num-update", "1000", "--max-update", "1000", "--log-interval", str(log_interval),
        "--no-save", "--disable-validation", "--num-workers", "0", "--seed", "1",
    ]  # fmt: skip
    cfg = convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), argv)
    )
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    crit = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, crit)
    trainer.lr_step(0)
    d = task.source_dictionary
    b, t = gpu_step.batch_shape(size)
    mask = d.index("<mask>") if "<mask>" in d.indices else d.unk()
    batches = make_batches(8, b, t, len(d), d.pad(), d.bos(), d.eos(), mask, d.nspecial)
    return trainer, crit, batches


def count(
    size,
    criterion,
    graphs: bool,
    log_interval: int = 50,
    fused_attention=False,
    bf16=False,
    time_updates: int = 0,
    compiled=False,
):
    from fairseq.logging import metrics

    with tempfile.TemporaryDirectory() as work:
        trainer, crit, batches = build(
            size, criterion, work, log_interval, fused_attention, bf16, compiled
        )
        if compiled:
            return _count_compiled(trainer, batches, time_updates)

        def update(sample):
            with metrics.aggregate("train_inner"):
                trainer.train_step([sample])

        for sample in batches[:2]:
            update(sample)
        # Python calls: the whole update, and inside the criterion's forward and the backward
        calls = {"all": 0, "step": 0}
        inside = [0]
        forward, backward = crit.forward, trainer.optimizer.backward

        def counted(fn):
            def run(*a, **k):
                inside[0] += 1
                try:
                    return fn(*a, **k)
                finally:
                    inside[0] -= 1

            return run

        crit.forward, trainer.optimizer.backward = counted(forward), counted(backward)

        def profile(frame, event, arg):
            if event == "call":
                calls["all"] += 1
                calls["step"] += inside[0] > 0

        sys.setprofile(profile)
        try:
            update(batches[2])
        finally:
            sys.setprofile(None)
            crit.forward, trainer.optimizer.backward = forward, backward
        with OpCounter() as ops:
            update(batches[3])
        row = {
            "kernels": ops.kernels,
            "ops": dict(ops.ops),
            "syncs": sum(ops.syncs.values()),
            "sync_sites": dict(ops.syncs),
            "cpu_optimizer_reads": ops.cpu_optimizer,
            "python_calls": calls["all"],
            "python_calls_trainer": calls["all"] - calls["step"],
        }
        if time_updates:
            row["ms_per_update"] = _median_ms(update, batches, time_updates)
        if graphs:
            row["graphs"] = _graphs(trainer, batches[4])
        return row


def _median_ms(update, batches, n: int) -> float:
    """The median wall time of ``n`` updates (the batches in turn), in ms."""
    times = []
    for i in range(n):
        start = time.perf_counter()
        update(batches[i % len(batches)])
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _count_compiled(trainer, batches, time_updates: int) -> dict:
    """The update compiled as one graph by inductor (code for this CPU): the Python calls the
    host makes in an update (the graph itself is one call into generated code), the kernels
    inductor generated for it and dynamo's graph count. A dispatch mode cannot watch compiled
    code: no operator or sync count (``fullgraph=True`` leaves no sync in the graph)."""
    from fairseq.logging import metrics
    from torch._dynamo.utils import counters
    from torch._inductor import metrics as inductor_metrics

    def update(sample):
        with metrics.aggregate("train_inner"):
            trainer.train_step([sample])

    torch._dynamo.reset()
    counters.clear()
    inductor_metrics.reset()
    start = time.perf_counter()
    for sample in batches[:2]:  # eager (the optimizer state), then compiled
        update(sample)
    row = {"compile_s": time.perf_counter() - start}
    row["generated_kernels"] = inductor_metrics.generated_kernel_count
    row["graphs"] = counters["stats"]["unique_graphs"]
    update(batches[2])
    calls = [0]

    def profile(frame, event, arg):
        calls[0] += event == "call"

    sys.setprofile(profile)
    try:
        update(batches[3])
    finally:
        sys.setprofile(None)
    row.update(kernels="-", syncs="-", ops={}, sync_sites={})
    row["python_calls"] = row["python_calls_trainer"] = calls[0]
    if time_updates:
        row["ms_per_update"] = _median_ms(update, batches, time_updates)
    torch._dynamo.reset()
    return row


def _graphs(trainer, sample) -> int:
    model, crit = trainer.model, trainer.criterion
    sample, _ = trainer._prepare_sample(sample)

    def step(sample):
        loss, _, _ = crit(model, sample)
        loss.backward()
        return loss.detach()

    torch._dynamo.reset()
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        explained = torch._dynamo.explain(step)(sample)
    torch._dynamo.reset()
    return explained.graph_count


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help=f"comma list of: {', '.join(CONFIGS)}")
    p.add_argument("--no-graphs", action="store_true", help="skip dynamo's graph count (slow)")
    p.add_argument(
        "--layers", type=int, help="layers of every stack instead of the real count (quick look)"
    )
    p.add_argument(
        "--fused-attention",
        action="store_true",
        help="count attention as the one fused kernel per pass that CUDA runs: on the CPU, SDPA "
        "with dropout takes its unfused path (about a dozen operators a layer), so attention "
        "dropout is set to 0 here, which changes nothing else the update launches",
    )
    p.add_argument(
        "--bf16",
        action="store_true",
        help="the forward under bf16 autocast, as the recipes run it (CPU autocast's operator "
        "lists, which cast the same matrix products as CUDA's)",
    )
    p.add_argument(
        "--compiled",
        action="store_true",
        help="the recipes' COMPILE=update: the update compiled as one graph by inductor (code "
        "for this CPU; minutes at the real layer counts): the host's Python calls an update, "
        "the kernels inductor generated, dynamo's graphs (no operator or sync count)",
    )
    p.add_argument("--top", type=int, default=0, help="print the N most launched operators")
    p.add_argument(
        "--time",
        type=int,
        default=0,
        metavar="N",
        help="also time N more updates (median ms; see the module docstring)",
    )
    args = p.parse_args(argv)
    _register_structures(args.layers)
    names = args.only.split(",") if args.only else list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        p.error(f"--only: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    print(
        f"{'config':<12} {'kernels':>8} {'syncs':>6} {'py calls':>9} {'trainer':>8} {'graphs':>7}"
        + (f" {'ms/update':>10}" if args.time else "")
    )
    rows = {}
    for name in names:
        size, criterion = CONFIGS[name]
        row = rows[name] = count(
            size,
            criterion,
            not args.no_graphs,
            50,
            args.fused_attention,
            args.bf16,
            args.time,
            args.compiled,
        )
        print(
            f"{name:<12} {row['kernels']:>8} {row['syncs']:>6} {row['python_calls']:>9} "
            f"{row['python_calls_trainer']:>8} {row.get('graphs', '-'):>7}"
            + (f" {row['ms_per_update']:>10.1f}" if args.time else ""),
            flush=True,
        )
    for name, row in rows.items():
        if args.compiled:
            print(
                f"  {name}: inductor generated {row['generated_kernels']} kernels for the update "
                f"(first two updates, compilation included: {row['compile_s']:.0f} s)"
            )
        if args.top:
            top = sorted(row["ops"].items(), key=lambda kv: -kv[1])[: args.top]
            print(f"  {name}: " + ", ".join(f"{op} {n}" for op, n in top))
        for site, n in sorted(row["sync_sites"].items(), key=lambda kv: -kv[1]):
            print(f"  {name}: {n} x sync at {site}")
    return rows


if __name__ == "__main__":
    main()
