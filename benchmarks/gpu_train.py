#!/usr/bin/env python
"""Real ``fairseq-train`` with the recipes' flags (examples/electra/pretrain.sh,
examples/mlm/pretrain.sh) on a binarized corpus of random tokens over the size's full vocabulary:
words/s and ms per update from fairseq's own log (the first log interval, with start-up, compile
and CUDA-graph capture, left out and reported apart), MFU against the device's peak; and the GPU's
busy share over a few updates (``--busy``: the same flags parsed by fairseq, the model,
criterion and Trainer built as ``fairseq-train`` builds them, one torch.profiler window: the sum
of CUDA kernel time over the wall time).

  python benchmarks/gpu_train.py --size small --updates 120        # one fairseq-train row
  python benchmarks/gpu_train.py --size small --busy --updates 8   # the busy share
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
from gpu_sizes import JSON_TAG, batch_shape, is_roberta, peak_tflops, prepare_work, step_flops

HERE = os.path.dirname(os.path.abspath(__file__))
USER_DIR = os.path.join(os.path.dirname(HERE), "truneg_fairseq")
ARCH = {
    "small": "electra_small",
    "base": "electra_base",
    "tiny": "electra_tiny",
    "roberta-base": "truneg_roberta_base",
    "roberta-tiny": "truneg_roberta_tiny",
}


def binarize_random(size: str, work: str, lines: int) -> str:
    """``lines`` lines of random tokens over the size's dictionary, binarized by
    fairseq-preprocess under ``work`` (once); returns the data directory."""
    prepare_work(size, work)
    sub = os.path.join(work, "roberta" if is_roberta(size) else "electra")
    data = os.path.join(sub, f"bin-{size}")
    if os.path.isfile(os.path.join(data, "train.bin")):
        return data
    _, seq = batch_shape(size)
    nsym = sum(1 for _ in open(os.path.join(sub, "dict.txt")))
    rng = np.random.default_rng(2)
    raw = os.path.join(sub, f"train-{size}.txt")
    with open(raw, "w") as fh:
        for row in rng.integers(0, nsym, size=(lines, seq - 2)):
            fh.write(" ".join(f"w{i}" for i in row) + "\n")
    cmd = [sys.executable, "-m", "fairseq_cli.preprocess", "--only-source", "--trainpref", raw]
    cmd += ["--validpref", raw, "--srcdict", os.path.join(sub, "dict.txt"), "--destdir", data]
    subprocess.run(
        cmd + ["--workers", str(min(8, os.cpu_count() or 1))], check=True, capture_output=True
    )
    return data


def recipe_argv(size: str, data: str, updates: int, cuda: bool, compile_=False) -> list:
    """The recipe's fairseq-train arguments for ``size`` (bf16 autocast on a GPU, fp32 on a CPU);
    ``compile_``: False, True (the encoder stacks) or a scope (``stacks``, ``model``,
    ``update``; RoBERTa: ``model`` for True and ``stacks``)."""
    b, t = batch_shape(size)
    argv = [data, "--user-dir", USER_DIR, "--arch", ARCH[size], "--tokens-per-sample", str(t)]
    argv += ["--batch-size", str(b), "--required-batch-size-multiple", "1", "--seed", "1"]
    argv += ["--lr-scheduler", "polynomial_decay", "--warmup-updates", "10"]
    argv += ["--total-num-update", str(updates), "--max-update", str(updates), "--num-workers", "1"]
    if is_roberta(size):  # examples/mlm/pretrain.sh
        argv += ["--task", "batch_masked_lm", "--criterion", "mlm_hard_correction"]
        argv += ["--synonym-table", os.path.join(os.path.dirname(data), "synonyms.npz")]
        argv += ["--sample-break-mode", "complete", "--max-positions", str(t)]
        argv += ["--mlm-prediction-slots", "static", "--optimizer", "fused_adamw"]
        argv += ["--fused-adamw-betas", "(0.9,0.98)", "--fused-adamw-eps", "1e-6"]
        argv += ["--clip-norm", "0.0", "--fused-adamw-weight-decay", "0.01", "--lr", "1e-4"]
        argv += ["--dropout", "0.1", "--attention-dropout", "0.1"] + (["--bf16"] if cuda else [])
        if compile_:  # the recipe's COMPILE=model|update
            scope = "model" if compile_ in (True, "stacks") else str(compile_)
            argv += ["--batch-mlm-compile", "--batch-mlm-compile-scope", scope]
    else:  # examples/electra/pretrain.sh
        argv += ["--task", "electra", "--criterion", "electra", "--sample-break-mode", "none"]
        argv += ["--electra-max-positions", "512" if not size.endswith("tiny") else str(t)]
        argv += ["--optimizer", "fused_adamw", "--fused-adamw-betas", "(0.9,0.999)"]
        argv += ["--fused-adamw-eps", "1e-6", "--fused-adamw-weight-decay", "0.01"]
        argv += ["--clip-norm", "1.0", "--mlm-prediction-slots", "static", "--lr", "5e-4"]
        argv += ["--electra-bf16-autocast"] if cuda else []
        if compile_:
            scope = "stacks" if compile_ is True else str(compile_)
            argv += ["--electra-compile", "--electra-compile-scope", scope]
    return argv + ([] if cuda else ["--cpu"])


_FIELD = re.compile(r"\b(num_updates|ups|wps|wall)=([\d.]+)")


def parse_log(text: str) -> list:
    """The training intervals of a fairseq ``--log-format simple`` log: dicts with
    num_updates, ups, wps and wall (the ``train_inner`` lines)."""
    rows = []
    for line in text.splitlines():
        if "num_updates=" not in line or "ups=" not in line:
            continue
        fields = {k: float(v) for k, v in _FIELD.findall(line)}
        if {"num_updates", "ups", "wps"} <= set(fields) and fields["ups"] > 0:
            rows.append(fields)
    return rows


def summarize(intervals: list, size: str, peak: float, started_s: float) -> dict:
    """ms/update and words/s over every interval after the first (fairseq's own ``ups`` and
    ``wps`` per interval), and the start-up seconds before the steady rate."""
    if len(intervals) < 2:
        return {"error": f"FAIL: {len(intervals)} log interval(s) reached; 2 needed"}
    first, steady = intervals[0], intervals[1:]
    updates = [b["num_updates"] - a["num_updates"] for a, b in zip(intervals, steady)]
    seconds = sum(n / r["ups"] for n, r in zip(updates, steady))
    ms = 1000.0 * seconds / sum(updates)
    wps = sum(n / r["ups"] * r["wps"] for n, r in zip(updates, steady)) / seconds
    flops = step_flops(size)
    return {
        "ms_per_update": ms,
        "words_per_s": wps,
        "updates_timed": int(sum(updates)),
        "flops_per_update": flops,
        "mfu_percent": 100 * flops / (ms / 1000) / (peak * 1e12) if peak else None,
        # process start to the first log line, less the steady time of the updates logged by
        # then: imports, data loading, the first update (compile, CUDA-graph capture, autotuning)
        "startup_s": None
        if started_s is None
        else max(0.0, started_s - first["num_updates"] * ms / 1000),
    }


def run_train(
    size, work, cuda, updates, timeout, log_interval=10, compile_=False, peak=0.0, sync_debug=None
):
    """One fairseq-train row; stopped (its process group) at ``timeout``, the intervals logged
    by then still count. ``sync_debug``: TRUNEG_SYNC_DEBUG for the run (warn or error)."""
    t0 = time.perf_counter()
    # one epoch longer than the run: no epoch boundary (loader restart) inside a timed interval
    data = binarize_random(size, work, batch_shape(size)[0] * (updates + 10))
    argv = recipe_argv(size, data, updates, cuda, compile_)
    argv += ["--log-format", "simple", "--log-interval", str(log_interval), "--no-save"]
    argv += ["--disable-validation", "--save-dir", os.path.join(work, "save")]
    cmd = [sys.executable, "-m", "fairseq_cli.train", *argv]
    suffix = f"-compiled-{'stacks' if compile_ is True else compile_}" if compile_ else ""
    suffix += f"-sync-{sync_debug}" if sync_debug else ""
    log_path = os.path.join(work, f"train-{size}{suffix}.log")
    env = dict(os.environ, TRUNEG_SYNC_DEBUG=sync_debug) if sync_debug else None
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    stopped, first_log, deadline = False, None, t0 + timeout
    while proc.poll() is None:
        if first_log is None and "num_updates=" in open(log_path).read():
            first_log = time.perf_counter() - t0
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)  # fairseq-train and its loader workers
            proc.wait()
            stopped = True
            break
        time.sleep(0.5)
    text = open(log_path).read()
    row = {"size": size, "batch": batch_shape(size)[0], "seq": batch_shape(size)[1]}
    row.update(summarize(parse_log(text), size, peak, first_log))
    row["process_s"] = time.perf_counter() - t0
    row["command"] = "fairseq-train " + " ".join(argv).replace(USER_DIR, "truneg_fairseq")
    if stopped and row.get("error"):
        row["error"] = f"FAIL: stopped at its share of the budget ({timeout:.0f} s) " + row[
            "error"
        ].removeprefix("FAIL: ")
        if compile_ == "update" and "training updates: compiled as" not in text:
            row["error"] += (
                " (the update was not compiled yet: run the row alone, --rows train:"
                f"{size}:compiled, with a larger --budget-s)"
            )
    elif stopped:
        row["note"] = f"stopped at its share of the budget ({timeout:.0f} s)"
    elif proc.returncode:
        row["error"] = (
            f"FAIL: exit {proc.returncode}: " + " | ".join(text.strip().splitlines()[-3:])[:300]
        )
    return row


def busy_share(size, work, cuda, warmup, updates):
    """GPU busy share over ``updates`` updates through fairseq's Trainer with the recipe's flags:
    CUDA kernel time (torch.profiler) over wall time. On a CPU the window is timed only."""
    import torch
    from fairseq import options, tasks, utils
    from fairseq.dataclass import utils as dataclass_utils
    from fairseq.trainer import Trainer

    import truneg_fairseq  # noqa: F401

    data = binarize_random(size, work, batch_shape(size)[0] * 40)
    argv = recipe_argv(size, data, warmup + updates, cuda)
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    cfg = dataclass_utils.convert_namespace_to_omegaconf(args)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    itr = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=True)
    samples = iter(itr)
    for _ in range(warmup):
        trainer.train_step([next(samples)])
    acts = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if cuda else []
    )
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    with torch.profiler.profile(activities=acts) as prof:
        t0 = time.perf_counter()
        for _ in range(updates):
            trainer.train_step([next(samples)])
        sync()
        wall = time.perf_counter() - t0
    kernel_us = 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernel_us += e.time_range.elapsed_us()  # a kernel, memcpy or memset on the GPU
    b, t = batch_shape(size)
    return {
        "size": size,
        "batch": b,
        "seq": t,
        "updates_profiled": updates,
        "ms_per_update_profiled": 1000 * wall / updates,
        "kernel_ms_per_update": kernel_us / 1000 / updates if cuda else None,
        "busy_share": kernel_us / 1e6 / wall if cuda else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", required=True, choices=sorted(ARCH))
    p.add_argument("--work", default=None, help="directory for the dictionary and binarized data")
    p.add_argument("--updates", type=int, default=120)
    p.add_argument("--warmup", type=int, default=5, help="with --busy: updates before the profiler")
    p.add_argument("--busy", action="store_true", help="the GPU busy share (torch.profiler)")
    p.add_argument(
        "--compile",
        nargs="?",
        const="stacks",
        default=False,
        choices=["stacks", "model", "update"],
        help="the recipe's COMPILE=1 (--electra-compile: the stacks), or COMPILE=model/update "
        "(--electra-compile-scope)",
    )
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = p.parse_args(argv)
    import tempfile

    import torch

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA GPU; pass --device cpu", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="gpu_train_")
    if args.busy:
        row = busy_share(args.size, work, cuda, args.warmup, args.updates)
    else:
        peak = peak_tflops(torch.device(args.device))
        row = run_train(
            args.size, work, cuda, args.updates, args.timeout, args.log_interval, args.compile, peak
        )
    print(JSON_TAG + json.dumps(row) if args.json else json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
