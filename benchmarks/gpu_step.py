#!/usr/bin/env python
"""Pre-training step on a CUDA GPU: ELECTRA and RoBERTa, eager vs static slots vs compiled vs CUDA
graphs, bf16, each criterion, with a HuggingFace transformers step on the same batches for reference.

For every configuration it prints the median ms/step (forward + backward + clipping + fused
AdamW update, all on the GPU, synchronised once per timed step), tokens/s, the analytic FLOPs of
the step and the model-FLOPs utilisation (MFU) against the device's dense bf16 peak.

Every configuration runs in a process of its own (``--one SIZE:CRITERION:MODE --json``, started
by this script or by ``gpu_check.py``): torch.compile keeps its compiled code per process, and a
run of many compiled models in one process reaches dynamo's recompile limit after a few of them,
after which the later "compiled" rows would silently run eager. A child also reports how many
graphs dynamo built and whether it fell back to eager.

  python benchmarks/gpu_step.py                       # ELECTRA-small 128 x 128 and base 32 x 512
  python benchmarks/gpu_step.py --sizes roberta-base  # RoBERTa-base 16 x 512 (masked_lm, HC, SR, sent-KL)
  python benchmarks/gpu_step.py --sizes small --fairseq-train   # + a real fairseq-train row
  python benchmarks/gpu_step.py --one small:mlm_hard_correction:compiled --json

Without a CUDA GPU it says so and exits 0; ``--device cpu --sizes tiny --rounds 2`` runs the
same code on the CPU as a smoke test (the numbers then mean nothing for a GPU).
"""

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import make_batches
from gpu_setup import _model_args, compile_model, hf_setup, plugin_setup  # noqa: F401
from gpu_sizes import (  # noqa: F401  (re-exported: other scripts import them from here)
    CRITERIA,
    JSON_TAG,
    MODES,
    PEAK_TFLOPS,
    ROBERTA_CRITERIA,
    ROBERTA_SIZES,
    SIZES,
    VOCAB,
    batch_shape,
    criteria_for,
    device_name,
    is_roberta,
    peak_tflops,
    prepare_work,
    step_flops,
    vocab_for,
    write_table,
)


def time_steps(step, batches, rounds, warmup, device):
    import torch

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for i in range(warmup):
        step(batches[i % len(batches)])
    sync()
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        step(batches[i % len(batches)])
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class DynamoWatch(logging.Handler):
    """Counts dynamo's "hit config.recompile_limit" warnings: after one, the function it names
    runs eager for the rest of the process, so a "compiled" timing would not be one."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.fallbacks = []

    def emit(self, record):
        msg = record.getMessage()
        if "recompile_limit" in msg or "cache_size_limit" in msg:
            self.fallbacks.append(msg.splitlines()[0])


def parse_config(config: str):
    """``SIZE:CRITERION:MODE`` -> (size, criterion, mode); criterion ``hf`` is the HuggingFace
    transformers step (mode ``eager``)."""
    parts = config.split(":")
    if len(parts) != 3:
        raise ValueError(
            f"--one takes SIZE:CRITERION:MODE (e.g. small:mlm_hard_correction:compiled), got {config!r}"
        )
    size, criterion, mode = parts
    if size not in SIZES and size not in ROBERTA_SIZES:
        raise ValueError(f"unknown size {size!r}: one of {', '.join([*SIZES, *ROBERTA_SIZES])}")
    if criterion == "hf":
        if mode != "eager":
            raise ValueError(f"the transformers step runs eager only: use {size}:hf:eager")
    elif criterion not in criteria_for(size) or mode not in MODES:
        raise ValueError(
            f"{config!r}: criterion one of {', '.join(criteria_for(size))} or hf, mode one of {', '.join(MODES)}"
        )
    return size, criterion, mode


def run_one(config, device, rounds, warmup, work, peak=0.0, backend="inductor"):
    """Time one configuration in this process; returns a dict (``error`` set when it failed)."""

    size, criterion, mode = parse_config(config)
    b, t = batch_shape(size)
    flops = step_flops(size)
    out = {
        "config": config,
        "size": size,
        "criterion": criterion,
        "mode": mode,
        "batch": b,
        "seq": t,
        "device": device_name(device),
        "flops_per_step": flops,
    }
    if mode == "graphs" and device.type != "cuda":
        return {**out, "error": "not run: CUDA graphs need a CUDA device"}
    watch = DynamoWatch()
    dynamo_log = logging.getLogger("torch._dynamo")
    dynamo_log.addHandler(watch)
    try:
        table = prepare_work(size, work)
        if criterion == "hf":
            step = hf_setup(size, 1, device)
            pad, bos, eos, nspecial = 1, 0, 2, 4
            mask_idx = vocab_for(size) - 1
        else:
            compile_mode = {
                "compiled": "default",
                "graphs": "reduce-overhead",
                "model": "model",
            }.get(mode)
            task, step = plugin_setup(
                size,
                criterion,
                "dynamic" if mode == "dynamic" else "static",
                compile_mode,
                work,
                table,
                device,
                backend,
            )
            td = task.source_dictionary
            pad, bos, eos, nspecial, mask_idx = (
                td.pad(),
                td.bos(),
                td.eos(),
                td.nspecial,
                task.mask_idx,
            )
        batches = make_batches(
            4, b, t, vocab_for(size), pad, bos, eos, mask_idx, nspecial, device=device
        )
        t0 = time.perf_counter()
        sec = time_steps(step, batches, rounds, warmup, device)
        out.update(
            ms_per_step=1000 * sec,
            tokens_per_s=b * t / sec,
            wall_s=time.perf_counter() - t0,
            mfu_percent=(100 * flops / sec / (peak * 1e12)) if peak else None,
        )
        if mode in ("compiled", "graphs", "model"):
            from torch._dynamo.utils import counters

            out["dynamo"] = {
                "graphs": int(counters["stats"].get("unique_graphs", 0)),
                "fell_back_to_eager": watch.fallbacks,
                "backend": backend,
            }
            if watch.fallbacks:
                out["error"] = "dynamo fell back to eager: " + watch.fallbacks[0]
    except ImportError as exc:
        out["error"] = f"not run: {exc} (pip install -r requirements-bench.txt)"
    except (
        Exception
    ) as exc:  # reported as a row: one failing configuration must not hide the others
        out["error"] = f"FAILED {type(exc).__name__}: {exc}"[:400]
    finally:
        dynamo_log.removeHandler(watch)
    return out


def run_isolated(
    config,
    device="cuda",
    rounds=20,
    warmup=5,
    work=None,
    peak=0.0,
    backend="inductor",
    timeout=None,
    env=None,
):
    """Run :func:`run_one` for ``config`` in a new Python process (see the module docstring);
    returns its dict, with ``error`` set when the child failed, timed out or printed no result."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--one",
        config,
        "--json",
        "--device",
        device,
        "--rounds",
        str(rounds),
        "--warmup",
        str(warmup),
        "--peak-tflops",
        str(peak),
        "--compile-backend",
        backend,
    ]
    if work:
        cmd += ["--work", work]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {
            "config": config,
            "error": f"not finished: stopped after {timeout:.0f} s",
            "process_s": timeout,
        }
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(JSON_TAG):
            result = json.loads(line[len(JSON_TAG) :])
            result["process_s"] = time.perf_counter() - t0
            return result
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    return {
        "config": config,
        "error": f"FAILED (exit {proc.returncode}): {' | '.join(tail)}"[:400],
        "process_s": time.perf_counter() - t0,
    }


def format_rows(results, peak):
    """The printed table of :func:`run_one` results."""
    lines = [f"{'configuration':<44}{'ms/step':>10}{'tokens/s':>12}{'TFLOP/step':>12}{'MFU %':>8}"]
    for r in results:
        if r.get("ms_per_step") is None or r.get("error"):
            lines.append(f"{r['config']:<44}{r.get('error', '')}")
            continue
        mfu = r.get("mfu_percent")
        lines.append(
            f"{r['config']:<44}{r['ms_per_step']:>10.1f}{r['tokens_per_s']:>12.0f}"
            f"{r['flops_per_step'] / 1e12:>12.3f}{(mfu if mfu is not None else float('nan')):>8.1f}"
        )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sizes",
        default="small,base",
        help="comma list of: small, base, tiny (ELECTRA), roberta-base, roberta-tiny",
    )
    p.add_argument(
        "--criteria", default="", help="comma list (default: every criterion of each size's family)"
    )
    p.add_argument(
        "--modes",
        default=",".join(MODES),
        help="dynamic (boolean-mask positions, eager), static (fixed slots, eager), "
        "compiled (fixed slots, encoder stacks torch.compile'd), graphs (compiled "
        "with mode=reduce-overhead: the stacks replayed as CUDA graphs), model (the whole "
        "forward compiled with its backward)",
    )
    p.add_argument(
        "--one",
        metavar="SIZE:CRITERION:MODE",
        help="time this one configuration here (criterion "
        "hf with mode eager: the transformers step)",
    )
    p.add_argument(
        "--json", action="store_true", help="with --one: print the result as one JSON line"
    )
    p.add_argument(
        "--work", help="with --one: directory holding the dictionaries and tables (made if missing)"
    )
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="cuda")
    p.add_argument(
        "--compile-backend",
        default="inductor",
        help="torch.compile backend (inductor; aot_eager traces without generating code)",
    )
    p.add_argument(
        "--peak-tflops", type=float, default=0.0, help="override the device's dense bf16 peak"
    )
    p.add_argument("--no-hf", action="store_true", help="skip the transformers reference step")
    p.add_argument(
        "--fairseq-train", action="store_true", help="also time fairseq-train with the recipe flags"
    )
    p.add_argument("--fairseq-train-updates", type=int, default=300)
    args = p.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: nothing measured (use --device cpu --sizes tiny for a smoke run)")
        return 0
    device = torch.device(args.device)
    peak = peak_tflops(device, args.peak_tflops)
    if args.one:
        work = args.work or tempfile.mkdtemp(prefix="gpu_step_")
        result = run_one(
            args.one, device, args.rounds, args.warmup, work, peak, args.compile_backend
        )
        print(JSON_TAG + json.dumps(result) if args.json else format_rows([result], peak))
        return 0
    print(
        f"device: {device_name(device)}; torch {torch.__version__}; peak {peak or '?'} TFLOP/s (bf16 dense)"
    )

    with tempfile.TemporaryDirectory(prefix="gpu_step_") as work:
        results = []
        for size in args.sizes.split(","):
            criteria = args.criteria.split(",") if args.criteria else criteria_for(size)
            for criterion in criteria:
                for mode in args.modes.split(","):
                    results.append(
                        run_isolated(
                            f"{size}:{criterion}:{mode}",
                            args.device,
                            args.rounds,
                            args.warmup,
                            work,
                            peak,
                            args.compile_backend,
                        )
                    )
            if not args.no_hf:
                results.append(
                    run_isolated(
                        f"{size}:hf:eager", args.device, args.rounds, args.warmup, work, peak
                    )
                )
            if args.fairseq_train:
                from gpu_train import run_train

                row = run_train(
                    size, work, device.type == "cuda", args.fairseq_train_updates, 600.0, peak=peak
                )
                results.append(
                    {
                        "config": f"{size}:fairseq-train (recipe flags)",
                        "ms_per_step": row.get("ms_per_update"),
                        "tokens_per_s": row.get("words_per_s"),
                        "flops_per_step": step_flops(size),
                        "mfu_percent": row.get("mfu_percent"),
                        "error": row.get("error"),
                    }
                )
        print(format_rows(results, peak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
