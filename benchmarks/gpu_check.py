#!/usr/bin/env python
"""One check of a new GPU machine (``make gpu-check``), at most ``--budget-s`` (default 280 s),
the rows that matter first. Writes ``gpu-check/report.md`` and ``gpu-check/report.json`` in the
working directory (each atomically; nothing else there is touched): the device and versions,
and one row per measurement, PASS or FAIL with the reason, or "not run (budget)" when the time
ran out before it (each row gets a share of what is left, by weight).

The rows, in order:
1. real ``fairseq-train`` with the recipes' flags (gpu_train.py) for ELECTRA-small 128 x 128,
   ELECTRA-base 32 x 512 and RoBERTa-base 16 x 512: words/s, ms per update (fairseq's log,
   first interval left out), MFU, start-up seconds;
2. the GPU busy share (torch.profiler: CUDA kernel time / wall time over a few updates of
   fairseq's Trainer with the same flags) for ELECTRA-small;
3. the HuggingFace transformers step of the ELECTRA-small pair on the same batches, against the
   plugin's step (gpu_step.py --one);
4. correctness per precision (gpu_correct.py): ELECTRA-small and RoBERTa with hard correction,
   fp32 / bf16 / amp / fp16 from the same start on the same batches, ``--updates`` (30) updates:
   every loss finite, the final mean within ``--tolerance`` of fp32's;
5. the loader's batches/s (the task's iterator, the recipes' 1 worker) against each update rate;
6. ELECTRA-small and RoBERTa-base with the recipes' COMPILE=update (compile seconds; each given
   at least ``COMPILE_MIN_S`` while the budget has it), ELECTRA-small under torch's sync debug mode "error" (``TRUNEG_SYNC_DEBUG``), the busy share
   of the others;
7. with ``--full``: every criterion x eager / compiled / CUDA graphs (gpu_step.py).

``--quick`` (``make gpu-check QUICK=1``) runs the same rows at tiny sizes, on the CPU when
there is no GPU (amp, fp16 and CUDA graphs are then "not run: needs CUDA"): a test of the
command; its numbers say nothing about a GPU.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUDGET_STATUS = "not run (budget)"
CUDA_STATUS = "not run: needs CUDA"
MIN_START_S = 5.0  # a row is not started with less than this left
# a compiled row's least time (the budget allowing): a whole update compiled at a real size
# takes minutes, and a row stopped before it was compiled measures nothing
COMPILE_MIN_S = 150.0


def plan(quick: bool, full: bool, cuda: bool) -> list:
    """The rows, most important first: (id, section, title, weight, kind, params)."""
    from gpu_sizes import batch_shape

    small, base, rob = (
        ("tiny", None, "roberta-tiny") if quick else ("small", "base", "roberta-base")
    )
    shapes = [s for s in (small, base, rob) if s]
    rows = []
    for size in shapes:
        b, t = batch_shape(size)
        rows.append(
            (f"train:{size}", "fairseq-train", f"{size} {b} x {t}", 40, "train", {"size": size})
        )
    rows.append(
        (f"busy:{small}", "GPU busy", f"{small} (torch.profiler)", 15, "busy", {"size": small})
    )
    for cfg in (f"{small}:hf:eager", f"{small}:electra:static"):
        rows.append((f"step:{cfg}", "step", cfg, 12, "step", {"config": cfg}))
    for model in ("electra", "roberta"):
        rows.append((f"correct:{model}", "correctness", model, 35, "correct", {"model": model}))
    for size in shapes:
        b, t = batch_shape(size)
        rows.append(
            (f"loader:{size}", "data loader", f"{size} {b} x {t}", 5, "loader", {"size": size})
        )
    rows += [_compiled_row(small, 30), _compiled_row(rob, 20)]
    rows.append(
        (
            f"syncs:{small}",
            "fairseq-train",
            f"{small}, TRUNEG_SYNC_DEBUG=error (no wait for the device inside an update)",
            8,
            "syncs",
            {"size": small},
        )
    )
    for size in shapes[1:]:
        rows.append(
            (f"busy:{size}", "GPU busy", f"{size} (torch.profiler)", 10, "busy", {"size": size})
        )
    if full:
        import gpu_step

        for size in shapes:
            for mode in ("static", "compiled", "graphs", "model"):
                for crit in gpu_step.criteria_for(size):
                    cfg = f"{size}:{crit}:{mode}"
                    rows.append((f"step:{cfg}", "step (full)", cfg, 12, "step", {"config": cfg}))
    return rows


def _compiled_row(size: str, weight: int) -> tuple:
    """fairseq-train with the recipe's COMPILE=update (given at least ``COMPILE_MIN_S``)."""
    title = f"{size} COMPILE=update (the whole update, CUDA graphs)"
    params = {"size": size, "compile": "update", "min_s": COMPILE_MIN_S}
    return (f"train:{size}:compiled", "fairseq-train", title, weight, "train", params)


def _s(x) -> str:
    return "-" if x is None else f"{x:.1f} s"


def child(cmd: list, timeout: float):
    """The last JSON line of a child process, or (None, reason)."""
    from gpu_sizes import JSON_TAG

    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        for line in reversed(out.splitlines()):
            if line.startswith(JSON_TAG):
                return json.loads(line[len(JSON_TAG) :]), f"stopped at its share ({timeout:.0f} s)"
        return None, f"FAIL: not finished in its share of the budget ({timeout:.0f} s)"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(JSON_TAG):
            return json.loads(line[len(JSON_TAG) :]), None
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    return None, f"FAIL: exit {proc.returncode}: {' | '.join(tail)}"[:400]


class Check:
    """Runs the rows in order under the budget; keeps the rows' results and the context the
    later rows need (update rates for the loader rows, the correctness corpus)."""

    def __init__(self, args, cuda: bool, work: str, peak: float):
        self.args, self.cuda, self.work, self.peak = args, cuda, work, peak
        self.device = "cuda" if cuda else "cpu"
        self.update_rate = {}  # size -> updates/s of fairseq-train
        self.startup = {}  # size -> seconds before fairseq-train's steady rate (eager)
        self.curves = {}
        self.corpus = None

    def run(self, row_id, section, title, kind, params, timeout) -> list:
        """Report rows for one planned row (a correctness row gives one per precision)."""
        base = {"id": row_id, "section": section, "title": title}
        try:
            return getattr(self, "row_" + kind)(base, params, timeout)
        except Exception as exc:  # one failing row must not hide the others
            return [{**base, "status": "FAIL", "reason": f"{type(exc).__name__}: {exc}"[:400]}]

    def row_train(self, base, params, timeout):
        from gpu_train import run_train

        size, compiled = params["size"], params.get("compile", False)
        if compiled and not self.cuda:
            return [
                {**base, "status": CUDA_STATUS, "reason": "inductor (its CPU build takes minutes)"}
            ]
        updates = 20 if self.args.quick else 200
        interval = 5 if self.args.quick else 10
        r = run_train(size, self.work, self.cuda, updates, timeout, interval, compiled, self.peak)
        if r.get("error") or not r.get("ms_per_update"):
            return [{**base, **r, "status": "FAIL", "reason": r.get("error", "no timing")}]
        extra = ""
        if not compiled:
            self.update_rate[size] = 1000.0 / r["ms_per_update"]
            self.startup[size] = r["startup_s"]
        elif r["startup_s"] is not None and self.startup.get(size) is not None:
            r["compile_s"] = r["startup_s"] - self.startup[size]
            extra = f", compile ~{r['compile_s']:.0f} s (start-up over the eager row's)"
        mfu = f", MFU {r['mfu_percent']:.1f}%" if r.get("mfu_percent") is not None else ""
        reason = (
            f"{r['ms_per_update']:.1f} ms/update, {r['words_per_s']:.0f} words/s{mfu}, "
            f"start-up {_s(r['startup_s'])}{extra} ({r['updates_timed']} updates timed)"
        )
        return [
            {
                **base,
                **r,
                "status": "PASS",
                "reason": reason + ("; " + r["note"] if r.get("note") else ""),
            }
        ]

    def row_syncs(self, base, params, timeout):
        """The recipe's update under torch's sync debug mode "error" from update 6 on: PASS when
        the run reaches its last update, FAIL with the first wait's message otherwise."""
        from gpu_train import run_train

        if not self.cuda:
            return [{**base, "status": CUDA_STATUS, "reason": "torch's sync debug mode is CUDA's"}]
        size, updates = params["size"], 16
        r = run_train(size, self.work, True, updates, timeout, 4, False, self.peak, "error")
        if r.get("error") or not r.get("ms_per_update"):
            return [{**base, **r, "status": "FAIL", "reason": r.get("error", "no timing")}]
        reason = f"{updates} updates, none waited for the device from update 6 on"
        return [{**base, **r, "status": "PASS", "reason": reason}]

    def row_busy(self, base, params, timeout):
        cmd = [sys.executable, os.path.join(HERE, "gpu_train.py"), "--busy", "--json"]
        cmd += ["--size", params["size"], "--work", self.work, "--device", self.device]
        cmd += [
            "--updates",
            "3" if self.args.quick else "8",
            "--warmup",
            "1" if self.args.quick else "5",
        ]
        r, err = child(cmd, timeout)
        if r is None:
            return [{**base, "status": "FAIL", "reason": err}]
        share = r.get("busy_share")
        reason = (
            f"GPU busy {100 * share:.0f}% of {r['ms_per_update_profiled']:.1f} ms/update "
            f"({r['kernel_ms_per_update']:.1f} ms of kernels)"
            if share is not None
            else f"{r['ms_per_update_profiled']:.1f} ms/update profiled; no CUDA kernels on a CPU"
        )
        return [{**base, **r, "status": "PASS", "reason": reason}]

    def row_step(self, base, params, timeout):
        import gpu_step

        rounds, warmup = (3, 1) if self.args.quick else (10, 3)
        backend = "inductor" if self.cuda else "aot_eager"
        if params["config"].endswith(":graphs") and not self.cuda:
            return [{**base, "status": CUDA_STATUS, "reason": "CUDA graphs"}]
        r = gpu_step.run_isolated(
            params["config"], self.device, rounds, warmup, self.work, self.peak, backend, timeout
        )
        if r.get("error") or not r.get("ms_per_step"):
            return [{**base, **r, "status": "FAIL", "reason": r.get("error", "no timing")}]
        mfu = f", MFU {r['mfu_percent']:.1f}%" if r.get("mfu_percent") is not None else ""
        reason = f"{r['ms_per_step']:.1f} ms/step, {r['tokens_per_s']:.0f} tokens/s{mfu}"
        return [{**base, **r, "status": "PASS", "reason": reason}]

    def row_correct(self, base, params, timeout):
        from gpu_correct import CUDA_ONLY, PRECISIONS, judge

        t0 = time.perf_counter()
        if self.corpus is None:
            from gpu_corpus import build_corpus

            self.corpus = build_corpus(os.path.join(self.work, "corpus"), self.args.quick)
        model = params["model"]
        precisions = [p for p in PRECISIONS if self.cuda or p not in CUDA_ONLY]
        cmd = [sys.executable, os.path.join(HERE, "gpu_correct.py"), self.corpus["data_bin"]]
        cmd += [self.corpus["table"], "--model", model, "--precisions", ",".join(precisions)]
        cmd += ["--updates", str(self.updates), "--device", self.device]
        out, err = child(
            cmd + (["--quick"] if self.args.quick else []),
            max(1.0, timeout - (time.perf_counter() - t0)),
        )
        runs = judge((out or {}).get(model, {}), self.args.tolerance)
        self.curves[model] = runs
        rows = []
        for p in PRECISIONS:
            run = runs.get(p)
            row = {**base, "id": f"{base['id']}:{p}", "title": f"{model} {p}", "precision": p}
            if p in CUDA_ONLY and not self.cuda:
                rows.append({**row, "status": CUDA_STATUS, "reason": "fp16 autocast/loss scaling"})
            elif run is None and err and "share" in err:  # the child was stopped before it
                rows.append({**row, "status": BUDGET_STATUS, "reason": err})
            elif run is None or not run.get("losses") and run.get("status") != "FAIL":
                rows.append({**row, "status": "FAIL", "reason": err or "no result"})
            else:
                rows.append({**row, **run})
        return rows

    def row_loader(self, base, params, timeout):
        from gpu_corpus import loader_rate
        from gpu_sizes import batch_shape, is_roberta

        size = params["size"]
        family = "roberta" if is_roberta(size) else "electra"
        data = os.path.join(self.work, family, f"bin-{size}")
        if not os.path.isdir(data):
            from gpu_train import binarize_random

            data = binarize_random(size, self.work, batch_shape(size)[0] * 40)
        b, t = batch_shape(size)
        max_s = min(timeout / 2, 1.5 if self.args.quick else 8.0)
        r = loader_rate(data, family, b, t, 1, 20 if self.args.quick else 400, max_s)
        rate, steps = r.get("batches_per_s"), self.update_rate.get(size)
        if not rate:
            return [{**base, **r, "status": "FAIL", "reason": "no batch came out of the iterator"}]
        if steps is None:
            return [
                {
                    **base,
                    **r,
                    "status": "PASS",
                    "reason": f"{rate:.1f} batches/s (no update rate to compare)",
                }
            ]
        ok = rate >= steps
        reason = f"{rate:.1f} batches/s with 1 worker {'>=' if ok else '<'} {steps:.1f} updates/s"
        return [
            {
                **base,
                **r,
                "updates_per_s": steps,
                "status": "PASS" if ok else "FAIL",
                "reason": reason,
            }
        ]


def schedule(rows, budget_s: float, run_row, clock=time.perf_counter) -> list:
    """Run ``rows`` (planned tuples) in order; each gets ``left * weight / weight of the rows
    left`` seconds, at least its ``min_s`` while that much is left; rows not started for lack of
    time are reported as not run (budget)."""
    deadline = clock() + budget_s
    out = []
    for i, (row_id, section, title, weight, kind, params) in enumerate(rows):
        left = deadline - clock()
        if left < MIN_START_S:
            out.append(
                {
                    "id": row_id,
                    "section": section,
                    "title": title,
                    "status": BUDGET_STATUS,
                    "reason": f"{max(0.0, left):.0f} s of the {budget_s:.0f} s budget left",
                }
            )
            continue
        share = left * weight / sum(r[3] for r in rows[i:])
        share = max(share, min(params.get("min_s", 0.0), left))  # a compile takes what it takes
        t0 = clock()
        got = run_row(row_id, section, title, kind, params, share)
        for r in got:
            r.setdefault("row_s", clock() - t0)
            print(
                f"[gpu-check] {r['section']}: {r['title']}: {r['status']} {r.get('reason', '')}",
                flush=True,
            )
        out += got
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, the CPU when there is no GPU")
    p.add_argument(
        "--full", action="store_true", help="add every criterion x eager/compiled/graphs"
    )
    p.add_argument("--out-dir", default="gpu-check", help="where report.md and report.json go")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="time limit (default 280 s; --full 840 s; on a CPU 900 s)",
    )
    p.add_argument(
        "--updates", type=int, default=None, help="correctness updates (default 30; quick 10)"
    )
    p.add_argument(
        "--tolerance", type=float, default=0.02, help="relative final-loss tolerance vs fp32"
    )
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument(
        "--rows",
        default="",
        help="comma list of row-id prefixes to run (e.g. train:small,correct); default every row",
    )
    p.add_argument(
        "--peak-tflops", type=float, default=0.0, help="override the device's bf16 dense peak"
    )
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    import torch
    from gpu_sizes import peak_source

    cuda = torch.cuda.is_available() and args.device != "cpu"
    if (args.device == "cuda" or not args.quick) and not cuda:
        print(
            f"error: no CUDA GPU here (torch {torch.__version__}): the check times GPU steps. "
            "Run `make gpu-check QUICK=1` (python benchmarks/gpu_check.py --quick) for the CPU "
            "check of the command itself",
            file=sys.stderr,
        )
        return 2
    if args.rows and not any(
        r[0].startswith(w.strip())
        for r in plan(args.quick, args.full, True)
        for w in args.rows.split(",")
    ):
        ids = ", ".join(r[0] for r in plan(args.quick, args.full, True))
        print(f"error: --rows {args.rows!r} selects no row; the rows: {ids}", file=sys.stderr)
        return 2
    budget = args.budget_s if args.budget_s is not None else (840.0 if args.full else 280.0)
    if args.budget_s is None and not cuda:  # the quick check on a CPU: process starts dominate
        budget = 900.0
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    peak, source = peak_source(torch.device("cuda" if cuda else "cpu"), args.peak_tflops)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        check = Check(args, cuda, work, peak)
        check.updates = args.updates or (10 if args.quick else 30)
        planned = plan(args.quick, args.full, cuda)
        if args.rows:
            wanted = [w.strip() for w in args.rows.split(",") if w.strip()]
            planned = [r for r in planned if any(r[0].startswith(w) for w in wanted)]
        rows = schedule(planned, budget - (time.perf_counter() - t_start), check.run)
    from gpu_report import device_info, write_reports

    counts = {s: sum(r["status"] == s for r in rows) for s in ("PASS", "FAIL")}
    counts["not run"] = sum(r["status"].startswith("not run") for r in rows)
    counts["budget"] = sum(r["status"] == BUDGET_STATUS for r in rows)
    device = device_info()
    report = {
        "quick": args.quick,
        "full": args.full,
        "budget_s": budget,
        "elapsed_s": time.perf_counter() - t_start,
        "command": "python benchmarks/gpu_check.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "device": device,
        "peak_tflops": peak,
        "peak_source": source,
        "correctness_updates": check.updates,
        "tolerance": args.tolerance,
        "counts": counts,
        "rows": rows,
        "curves": {
            m: {p: {"losses": r.get("losses")} for p, r in runs.items()}
            for m, runs in check.curves.items()
        },
        "corpus": check.corpus or {},
    }
    write_reports(out_dir, report)
    print(
        f"[gpu-check] {report['elapsed_s']:.0f} s: {counts['PASS']} PASS, {counts['FAIL']} FAIL, "
        f"{counts['not run']} not run ({counts['budget']} for the budget); wrote "
        f"{os.path.join(args.out_dir, 'report.md')} and report.json",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
