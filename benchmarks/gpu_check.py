#!/usr/bin/env python
"""One check of a new GPU machine (``make gpu-check``): does training give the same losses in
every precision, how fast is a step, can the data loader keep up, and on what hardware and
software. Writes ``gpu-check/report.md`` and ``gpu-check/report.json`` in the working directory
(each written atomically; nothing else there is touched) and takes at most ``--budget-s``
(default 14 minutes; sections not reached in time are listed as not run).

1. correctness: the same ELECTRA-small and RoBERTa models (same seed, same batches from the
   task's own iterator over a binarized corpus) trained with hard correction through fairseq's
   Trainer in fp32, bf16 (the plugin's ``--bf16``: fp32 weights, bf16 autocast, no loss scaler),
   ``--amp`` and ``--fp16`` (``--mlm-loss-divisor`` for ELECTRA,
   as its recipe); each precision passes when the mean loss of its last tenth of updates is
   within ``--tolerance`` (2%) of fp32's. amp and fp16 need CUDA and are listed as not run
   without it.
2. speed: ms/step, tokens/s and MFU (bf16 autocast, fused AdamW) for ELECTRA-small 128 x 128,
   ELECTRA-base 32 x 512 and RoBERTa-base 16 x 512, every criterion, eager / compiled / CUDA
   graphs, and the HuggingFace transformers step on the same batches; every configuration in a
   process of its own (``gpu_step.py --one``), so that no compiled configuration inherits
   dynamo's caches and recompile counts from another.
3. data pipeline: batches/s of the task's batch iterator (masking included) with the recipes'
   loader workers (ELECTRA 1, RoBERTa fairseq's default 1) at each speed shape, against the step
   rate measured in 2.
4. device: GPU, driver, CPU, torch, CUDA, fairseq, transformers.

``--quick`` (``make gpu-check QUICK=1``) runs every section at tiny sizes (10 updates, a few
configurations), on the CPU when there is no GPU: a check that the command works, in about a
minute; its numbers say nothing about a GPU. On the CPU, compiled rows use dynamo with the
``aot_eager`` backend (the same graphs, no generated code: inductor's C++ build alone takes
minutes there), and the quick run starts two processes at a time.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import gpu_step
import numpy as np
from gpu_step import JSON_TAG

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

PRECISIONS = ["fp32", "bf16", "amp", "fp16"]
CUDA_ONLY = {"amp", "fp16"}
# correctness runs: model -> (fairseq flags, batch, seq); quick ones are tiny
CORRECTNESS = {
    "electra": (
        [
            "--task",
            "electra",
            "--arch",
            "electra_small",
            "--criterion",
            "mlm_hard_correction",
            "--mlm-prediction-slots",
            "static",
            "--optimizer",
            "fused_adamw",
            "--fused-adamw-eps",
            "1e-6",
            "--fused-adamw-weight-decay",
            "0.01",
            "--clip-norm",
            "1.0",
            "--lr",
            "5e-4",
        ],
        128,
        128,
    ),
    "roberta": (
        [
            "--task",
            "masked_lm",
            "--arch",
            "truneg_roberta_base",
            "--criterion",
            "mlm_hard_correction",
            "--optimizer",
            "adam",
            "--adam-betas",
            "(0.9,0.98)",
            "--adam-eps",
            "1e-6",
            "--weight-decay",
            "0.01",
            "--clip-norm",
            "0.0",
            "--lr",
            "1e-4",
        ],
        32,
        128,
    ),
}
# quick runs: the tiny archs (their sizes from the one table, truneg_fairseq/models/sizes.py)
TINY_MODEL = {
    "electra": ["--arch", "electra_tiny"],
    "roberta": ["--arch", "truneg_roberta_tiny"],
}
# the recipes' data-loader workers: examples/electra (NUM_WORKERS, default 1) and examples/mlm
# (fairseq's default --num-workers 1)
RECIPE_WORKERS = {"electra": 1, "roberta": 1}
FULL_SIZES = ["small", "base", "roberta-base"]
QUICK_SIZES = ["tiny", "roberta-tiny"]


# ---- corpus --------------------------------------------------------------------------------


def generated_lines(n: int, seed: int = 0):
    """Sentences of made-up words with Zipf-like frequencies and a little structure (a word
    tends to follow its neighbour in the list), so that a masked-LM loss falls with training."""
    rng = np.random.default_rng(seed)
    words = [
        "".join(
            rng.choice(list("bcdfgklmnprstvz")) + rng.choice(list("aeiou"))
            for _ in range(rng.integers(1, 4))
        )
        for _ in range(600)
    ]
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    lines = []
    for _ in range(n):
        k = int(rng.integers(6, 24))
        idx = rng.choice(len(words), size=k, p=p)
        idx[1::2] = (idx[0::2][: len(idx[1::2])] + 1) % len(words)
        lines.append(" ".join(words[i] for i in idx) + " .")
    return lines


def random_table(data_bin: str) -> str:
    """A synonym table of random pairs for ``data_bin``'s dictionary (precision and speed do not
    depend on which pairs are synonyms)."""
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable, dictionary_fingerprint

    d = Dictionary.load(os.path.join(data_bin, "dict.txt"))
    rng = np.random.default_rng(1)
    pairs = np.unique(rng.integers(d.nspecial, len(d), size=(4 * len(d), 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]].astype(np.int64)
    path = os.path.join(data_bin, "synonyms.npz")
    SynonymTable(
        pairs,
        np.zeros(0, np.int64),
        len(d),
        dictionary_fingerprint(d.symbols),
        {"source": "random"},
    ).save(path)
    return path


def build_corpus(work: str, quick: bool) -> dict:
    """A binarized corpus with a synonym table in ``work``: the WordNet-gloss corpus and its
    WordNet table (benchmarks/_common.py) for the full check, generated text with a random
    table for the quick one or where WordNet is missing."""
    t0 = time.perf_counter()
    if not quick:
        try:
            from _common import ensure_corpus

            data_bin = ensure_corpus(os.path.join(work, "wordnet"), 8000)
            return {
                "data_bin": data_bin,
                "table": os.path.join(data_bin, "synonyms.npz"),
                "source": "WordNet glosses, sentencepiece 8000, WordNet synonym table",
                "build_s": time.perf_counter() - t0,
            }
        except (
            Exception
        ) as exc:  # no WordNet on this machine: the generated corpus still checks everything
            note = f"WordNet-gloss corpus not built ({type(exc).__name__}); "
    else:
        note = ""
    from truneg_fairseq.data import corpus

    gen = os.path.join(work, "generated")
    train, valid, _, _ = corpus.write_split_corpus(
        generated_lines(3000 if quick else 200000),
        os.path.join(gen, "raw"),
        valid_fraction=0.02,
        seed=1,
    )
    model = corpus.train_sentencepiece(
        train, os.path.join(gen, "spm"), vocab_size=300 if quick else 4000, model_type="bpe"
    )
    for split, path in (("train", train), ("valid", valid)):
        corpus.encode_file(model, path, os.path.join(gen, "tok", f"{split}.txt"))
    data_bin = str(
        corpus.binarize(
            os.path.join(gen, "tok", "train.txt"),
            os.path.join(gen, "tok", "valid.txt"),
            os.path.join(gen, "data-bin"),
        )
    )
    return {
        "data_bin": data_bin,
        "table": random_table(data_bin),
        "source": note + "generated text, sentencepiece BPE, random synonym table",
        "build_s": time.perf_counter() - t0,
    }


# ---- 1. correctness --------------------------------------------------------------------------


def _fairseq_cfg(argv):
    from fairseq import options
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401

    return dataclass_utils.convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), argv)
    )


def precision_flags(model: str, precision: str, batch: int, seq: int):
    """The flags of one precision, as the recipes give them."""
    if (
        precision == "bf16"
    ):  # the plugin's --bf16: fp32 weights, bf16 autocast (compat/bf16_autocast.py)
        return ["--bf16"]
    if precision == "amp":
        return ["--amp"]
    if precision == "fp16":
        return (
            ["--fp16", "--mlm-loss-divisor", str(batch * seq * 15 // 100)]
            if model == "electra"
            else ["--fp16"]
        )
    return []


def train_one(
    model: str, precision: str, updates: int, data_bin: str, table: str, quick: bool, device: str
) -> dict:
    """Train ``model`` with hard correction for ``updates`` updates in ``precision`` through
    fairseq's Trainer; returns the loss of every update. The seed, the initial weights and the
    batches (the task's iterator, epochs repeated as needed) are the same for every precision."""
    import torch
    from fairseq import tasks, utils
    from fairseq.trainer import Trainer

    flags, batch, seq = CORRECTNESS[model]
    if quick:
        batch, seq = 8, 64
        flags = flags + TINY_MODEL[model]
    warmup = max(1, updates // 10)
    argv = [
        data_bin,
        *flags,
        "--synonym-table",
        table,
        "--tokens-per-sample",
        str(seq),
        "--sample-break-mode",
        "none",
        "--batch-size",
        str(batch),
        "--required-batch-size-multiple",
        "1",
        "--seed",
        "1",
        "--num-workers",
        "0",
        "--lr-scheduler",
        "polynomial_decay",
        "--warmup-updates",
        str(warmup),
        "--total-num-update",
        str(updates),
        "--max-update",
        str(updates),
        "--no-save",
        "--save-dir",
        os.path.join(os.path.dirname(data_bin), "save"),
        *precision_flags(model, precision, batch, seq),
    ]
    argv += (
        ["--electra-max-positions", str(seq)]
        if model == "electra"
        else ["--max-positions", str(seq)]
    )
    if device == "cpu":
        argv.append("--cpu")
    cfg = _fairseq_cfg(argv)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    net = task.build_model(cfg.model)
    crit = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, net, crit)
    losses, t0, epoch = [], time.perf_counter(), 1
    while len(losses) < updates:
        itr = task.get_batch_iterator(
            dataset=task.dataset("train"),
            max_sentences=batch,
            max_positions=seq,
            required_batch_size_multiple=1,
            seed=1,
            num_workers=0,
            epoch=epoch,
        )
        for sample in itr.next_epoch_itr(shuffle=True):
            if len(losses) >= updates:
                break
            if (
                sample["nsentences"] < batch
            ):  # the short last batch of an epoch: the same shape every update
                continue
            log = trainer.train_step([sample])
            losses.append(float(log["loss"]) if log is not None and "loss" in log else float("nan"))
        epoch += 1
    if device == "cuda":
        torch.cuda.synchronize()
    return {
        "model": model,
        "precision": precision,
        "batch": batch,
        "seq": seq,
        "losses": losses,
        "seconds": time.perf_counter() - t0,
    }


def correctness_rows(results: dict, tolerance: float) -> dict:
    """Pass/fail per (model, precision): the mean loss of the last tenth of updates (at least 2)
    within ``tolerance`` (relative) of fp32's, every loss finite."""
    out = {}
    for model, runs in results.items():
        ref = runs.get("fp32", {}).get("losses")
        for precision, run in runs.items():
            losses = run.get("losses")
            if not losses or not ref:
                run["status"] = run.get("status") or "not run"
                continue
            k = max(2, len(losses) // 10)
            final, ref_final = float(np.mean(losses[-k:])), float(np.mean(ref[-k:]))
            rel = abs(final - ref_final) / max(abs(ref_final), 1e-12)
            ok = bool(np.all(np.isfinite(losses))) and rel <= tolerance
            run.update(
                final_window=k,
                final_mean=final,
                rel_diff_vs_fp32=rel,
                passed=ok,
                status="pass" if ok else "FAIL",
            )
        out[model] = runs
    return out


# ---- 2. speed ------------------------------------------------------------------------------


def speed_configs(quick: bool, cuda: bool):
    """(config, reason-not-run or None), most informative first: every eager row and the
    transformers reference, then compiled, then CUDA graphs, so a budget cut drops the last."""
    if quick:
        # ELECTRA compiled (the path with most to go wrong) against transformers, RoBERTa eager:
        # every kind of child process once (the full check adds RoBERTa's transformers step)
        eager = ["tiny:hf:eager", "roberta-tiny:mlm_hard_correction:static"]
        compiled = ["tiny:mlm_hard_correction:compiled"]
        graphs = ["tiny:mlm_hard_correction:graphs"]
    else:
        eager, compiled, graphs = [], [], []
        for size in FULL_SIZES:
            eager += [f"{size}:{c}:static" for c in gpu_step.criteria_for(size)] + [
                f"{size}:hf:eager"
            ]
            compiled += [f"{size}:{c}:compiled" for c in gpu_step.criteria_for(size)]
            graphs += [f"{size}:{c}:graphs" for c in gpu_step.criteria_for(size)]
    out = [(c, None) for c in eager + compiled]
    out += [(c, None if cuda else "not run: needs CUDA") for c in graphs]
    return out


# ---- 3. data pipeline ----------------------------------------------------------------------


def loader_rate(
    data_bin: str, family: str, batch: int, seq: int, workers: int, max_batches: int, max_s: float
) -> dict:
    """Batches/s of the task's training batch iterator (``masked_lm`` for RoBERTa, ``electra``
    for ELECTRA: block building, masking, collating in ``workers`` loader processes), timed
    from the first batch on (the start-up, workers included, is reported apart)."""
    task_flags = (
        ["--task", "electra", "--arch", "electra_small", "--electra-max-positions", str(seq)]
        if family == "electra"
        else ["--task", "masked_lm", "--arch", "truneg_roberta_base", "--max-positions", str(seq)]
    )
    from fairseq import tasks

    cfg = _fairseq_cfg(
        [
            data_bin,
            *task_flags,
            "--tokens-per-sample",
            str(seq),
            "--sample-break-mode",
            "none",
            "--cpu",
            "--seed",
            "1",
        ]
    )
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    dataset = task.dataset("train")
    t0 = time.perf_counter()
    n, epoch, first_s, start = 0, 1, None, None
    while n < max_batches:
        itr = task.get_batch_iterator(
            dataset=dataset,
            max_sentences=batch,
            max_positions=seq,
            seed=1,
            required_batch_size_multiple=1,
            num_workers=workers,
            epoch=epoch,
        )
        for _ in itr.next_epoch_itr(shuffle=True):
            if first_s is None:
                first_s, start = time.perf_counter() - t0, time.perf_counter()
                continue
            n += 1
            if n >= max_batches or time.perf_counter() - start > max_s:
                break
        if start is not None and time.perf_counter() - start > max_s:
            break
        epoch += 1
    elapsed = time.perf_counter() - start
    return {
        "family": family,
        "batch": batch,
        "seq": seq,
        "workers": workers,
        "batches": n,
        "batches_per_s": n / elapsed if elapsed > 0 else None,
        "first_batch_s": first_s,
        "sequences_in_corpus": len(dataset),
    }


# ---- 4. device -----------------------------------------------------------------------------


def device_info() -> dict:
    import torch

    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu_cores": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    for name in ("fairseq", "transformers"):
        try:
            info[name] = __import__(name).__version__
        except Exception:
            info[name] = None
    if info["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=torch.cuda.get_device_name(0),
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            gpu_count=torch.cuda.device_count(),
            compute_capability=f"{props.major}.{props.minor}",
            bf16_supported=torch.cuda.is_bf16_supported(),
        )
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            info["driver"] = (
                out.stdout.strip().splitlines()[0]
                if out.returncode == 0 and out.stdout.strip()
                else None
            )
        except (OSError, subprocess.SubprocessError):
            info["driver"] = None
    info["device"] = (
        info.get("gpu") or f"CPU: {info['cpu']} ({info['cpu_cores']} cores), no CUDA GPU"
    )
    return info


# ---- report --------------------------------------------------------------------------------


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def render_md(r: dict) -> str:
    d = r["device"]
    lines = [
        f"# GPU check: {d['device']}",
        "",
        f"{'QUICK check (tiny sizes; numbers are a smoke test, not a measurement)' if r['quick'] else 'Full check'}, "
        f"{r['elapsed_s']:.0f} s of a {r['budget_s']:.0f} s budget. Corpus: {r['corpus']['source']}.",
        "",
        "## Device and software",
        "",
        "| | |",
        "|---|---|",
    ]
    for k in (
        "device",
        "gpu_memory_gib",
        "compute_capability",
        "driver",
        "cuda",
        "cudnn",
        "torch",
        "fairseq",
        "transformers",
        "python",
        "cpu",
        "cpu_cores",
        "platform",
    ):
        if k in d:
            lines.append(f"| {k} | {d[k]} |")
    c = r["correctness"]
    lines += [
        "",
        "## 1. Correctness (hard correction, same start, same batches)",
        "",
        f"{c['updates']} updates; pass: the mean loss of the last tenth of updates within "
        f"{100 * c['tolerance']:.0f}% of fp32's, every loss finite. Overall: **{c['overall']}**.",
        "",
    ]
    for model, runs in c["models"].items():
        done = [p for p in PRECISIONS if runs.get(p, {}).get("losses")]
        lines += [f"### {model}", ""]
        for p in PRECISIONS:
            run = runs.get(p, {})
            if run.get("losses"):
                lines.append(
                    f"- {p}: final mean {run['final_mean']:.4f}, {100 * run['rel_diff_vs_fp32']:.2f}% from fp32, "
                    f"{run['seconds']:.1f} s — {run['status']}"
                )
            else:
                lines.append(f"- {p}: {run.get('status', 'not run')}")
        if done:
            n = len(runs[done[0]]["losses"])
            every = max(1, n // 10)
            lines += ["", "| update | " + " | ".join(done) + " |", "|---|" + "---|" * len(done)]
            for i in list(range(every - 1, n, every)) + (
                [n - 1] if (n - 1) % every != every - 1 else []
            ):
                lines.append(
                    f"| {i + 1} | "
                    + " | ".join(
                        _fmt(runs[p]["losses"][i] if i < len(runs[p]["losses"]) else None, ".4f")
                        for p in done
                    )
                    + " |"
                )
        lines.append("")
    s = r["speed"]
    lines += [
        "## 2. Speed (bf16 autocast, fused AdamW; each configuration in its own process)",
        "",
        f"Peak used for MFU: {s['peak_tflops'] or 'unknown (no CUDA or unlisted GPU)'} TFLOP/s. "
        f"{s['note']}",
        "",
        "| configuration | batch x seq | ms/step | tokens/s | MFU % | vs HF | dynamo graphs | process s | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in s["rows"]:
        shape = f"{row.get('batch', '')} x {row.get('seq', '')}" if row.get("batch") else ""
        dyn = row.get("dynamo") or {}
        lines.append(
            f"| {row['config']} | {shape} | {_fmt(row.get('ms_per_step'))} | {_fmt(row.get('tokens_per_s'), '.0f')} | "
            f"{_fmt(row.get('mfu_percent'))} | {_fmt(row.get('speedup_vs_hf'), '.2f')} | {dyn.get('graphs', '')} | "
            f"{_fmt(row.get('process_s'), '.0f')} | {row.get('error') or ''} |"
        )
    dp = r["data_pipeline"]
    lines += [
        "",
        "## 3. Data pipeline (the task's batch iterator, masking included)",
        "",
        "| model | batch x seq | loader workers | batches/s | first batch s | fastest step/s | keeps up |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in dp["rows"]:
        if row.get("error"):
            lines.append(
                f"| {row['family']} | {row['batch']} x {row['seq']} | {row.get('workers', '')} | {row['error']} | | | |"
            )
            continue
        lines.append(
            f"| {row['family']} | {row['batch']} x {row['seq']} | {row['workers']} | {_fmt(row['batches_per_s'])} | "
            f"{_fmt(row['first_batch_s'], '.2f')} | {_fmt(row.get('steps_per_s'))} | {row.get('keeps_up', '-')} |"
        )
    lines += [
        "",
        f"Report: {r['files']['md']} and {r['files']['json']}; command: `{r['command']}`.",
        "",
    ]
    return "\n".join(lines)


def write_reports(out_dir: str, report: dict) -> None:
    """report.json and report.md, each written whole or not at all (nothing else in the
    directory is touched)."""
    from truneg_fairseq.io_utils import atomic_open

    with atomic_open(os.path.join(out_dir, "report.json")) as f:
        json.dump(report, f, indent=1, default=str)
        f.write("\n")
    with atomic_open(os.path.join(out_dir, "report.md")) as f:
        f.write(render_md(report))


# ---- driver --------------------------------------------------------------------------------


def child_correctness(args) -> int:
    device = "cuda" if args.device == "cuda" else "cpu"
    runs = {}
    for model in args.model.split(","):
        runs[model] = {}
        for precision in args.precisions.split(","):
            try:
                runs[model][precision] = train_one(
                    model, precision, args.updates, args.data_bin, args.table, args.quick, device
                )
            except Exception as exc:  # reported in its row: the other precisions still run
                runs[model][precision] = {"status": f"FAILED {type(exc).__name__}: {exc}"[:400]}
    print(JSON_TAG + json.dumps(runs))
    return 0


def _child(cmd, timeout):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"not finished: stopped after {timeout:.0f} s (budget)"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(JSON_TAG):
            return json.loads(line[len(JSON_TAG) :]), None
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    return None, f"FAILED (exit {proc.returncode}): {' | '.join(tail)}"[:400]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, 10 updates, a few configurations (CPU if no GPU)",
    )
    p.add_argument("--out-dir", default="gpu-check", help="where report.md and report.json go")
    p.add_argument(
        "--budget-s", type=float, default=None, help="time limit (default: 840 s; quick: 300 s)"
    )
    p.add_argument(
        "--updates", type=int, default=None, help="correctness updates (default 200; quick 10)"
    )
    p.add_argument(
        "--tolerance", type=float, default=0.02, help="relative final-loss tolerance against fp32"
    )
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    # a correctness child (started by this script)
    p.add_argument("--child-correctness", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--precisions", help=argparse.SUPPRESS)
    p.add_argument("--data-bin", help=argparse.SUPPRESS)
    p.add_argument("--table", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_correctness:
        return child_correctness(args)

    t_start = time.perf_counter()
    import torch

    cuda = torch.cuda.is_available() and args.device != "cpu"
    if args.device == "cuda" and not cuda:
        print(
            "error: --device cuda but torch sees no CUDA GPU (torch "
            + torch.__version__
            + "); run "
            "`make gpu-check QUICK=1` for the CPU check, or install torch's CUDA build",
            file=sys.stderr,
        )
        return 2
    if not cuda and not args.quick:
        print(
            "error: no CUDA GPU here (torch "
            + torch.__version__
            + "): the full check times GPU steps. "
            "Run `make gpu-check QUICK=1` (python benchmarks/gpu_check.py --quick) for the CPU check "
            "of the command itself",
            file=sys.stderr,
        )
        return 2
    device = "cuda" if cuda else "cpu"
    budget = args.budget_s or (300.0 if args.quick else 840.0)
    deadline = t_start + budget
    updates = args.updates or (10 if args.quick else 200)
    parallel = 2 if (args.quick and not cuda) else 1  # GPU timings: one process at a time
    backend = "inductor" if cuda else "aot_eager"
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)

    def left():
        return max(1.0, deadline - time.perf_counter())

    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        corpus_info = build_corpus(work, args.quick)
        print(
            f"[gpu-check] corpus ready in {corpus_info['build_s']:.0f} s: {corpus_info['source']}",
            flush=True,
        )
        peak = gpu_step.peak_tflops(torch.device(device))
        rounds, warmup = (3, 1) if args.quick else (10, 3)
        precisions = [p for p in PRECISIONS if cuda or p not in CUDA_ONLY]

        # the jobs: one correctness process (every model and precision), one per speed configuration
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child-correctness",
            "--model",
            ",".join(CORRECTNESS),
            "--precisions",
            ",".join(precisions),
            "--updates",
            str(updates),
            "--data-bin",
            corpus_info["data_bin"],
            "--table",
            corpus_info["table"],
            "--device",
            device,
        ]
        if args.quick:
            cmd.append("--quick")
        jobs = [("correctness", "all", cmd)]
        configs = speed_configs(args.quick, cuda)
        speed_jobs = [("speed", config, reason) for config, reason in configs]
        if (
            parallel > 1
        ):  # the longest (compiling) processes first, so that none is left alone at the end
            speed_jobs.sort(key=lambda job: ":compiled" not in job[1])
            jobs = speed_jobs[:1] + jobs + speed_jobs[1:]
        else:
            jobs += speed_jobs

        results = {"correctness": {}, "speed": {}}

        def run_job(job):
            kind, key, payload = job
            remaining = deadline - time.perf_counter()
            if kind == "speed" and payload is not None:
                return kind, key, {"config": key, "error": payload}
            if remaining < 5:
                return (
                    kind,
                    key,
                    {}
                    if kind == "correctness"
                    else {"config": key, "error": "not run: time budget spent"},
                )
            t0 = time.perf_counter()
            if kind == "correctness":
                out, err = _child(payload, remaining)
                print(
                    f"[gpu-check] correctness: {time.perf_counter() - t0:.0f} s{' ' + err if err else ''}",
                    flush=True,
                )
                return (
                    kind,
                    key,
                    out
                    if out is not None
                    else {m: {p: {"status": err} for p in precisions} for m in CORRECTNESS},
                )
            res = gpu_step.run_isolated(
                key,
                device,
                rounds,
                warmup,
                os.path.join(work, "speed"),
                peak,
                backend,
                timeout=remaining,
            )
            print(
                f"[gpu-check] speed {key}: {time.perf_counter() - t0:.0f} s"
                f"{' ' + res['error'] if res.get('error') else ''}",
                flush=True,
            )
            return kind, key, res

        os.makedirs(os.path.join(work, "speed"), exist_ok=True)
        for size in QUICK_SIZES if args.quick else FULL_SIZES:  # once, before children share them
            gpu_step.prepare_work(size, os.path.join(work, "speed"))
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            for kind, key, res in pool.map(run_job, jobs):
                results[kind][key] = res

        corr_models = {}
        for model in CORRECTNESS:
            runs = results["correctness"]["all"].get(model) or {}
            for p in PRECISIONS:
                if p in CUDA_ONLY and not cuda:
                    runs[p] = {"status": "not run: needs CUDA"}
                runs.setdefault(p, {"status": "not run: time budget spent"})
            corr_models[model] = runs
        corr_models = correctness_rows(corr_models, args.tolerance)
        ran = [
            r
            for runs in corr_models.values()
            for p, r in runs.items()
            if r.get("losses") and p != "fp32"
        ]
        failed = [
            r
            for runs in corr_models.values()
            for r in runs.values()
            if str(r.get("status", "")).startswith("FAIL")
        ]
        overall = "FAIL" if failed else ("pass" if ran else "not run")

        speed_rows = [results["speed"][c] for c, _ in configs]
        hf = {
            r["size"]: r.get("ms_per_step")
            for r in speed_rows
            if r.get("criterion") == "hf" and r.get("ms_per_step")
        }
        for r in speed_rows:
            if r.get("ms_per_step") and r.get("criterion") != "hf" and hf.get(r.get("size")):
                r["speedup_vs_hf"] = hf[r["size"]] / r["ms_per_step"]

        data_rows = []
        for size in QUICK_SIZES if args.quick else FULL_SIZES:
            family = "roberta" if gpu_step.is_roberta(size) else "electra"
            b, t = gpu_step.batch_shape(size)
            row = {"family": family, "batch": b, "seq": t, "workers": RECIPE_WORKERS[family]}
            if deadline - time.perf_counter() < 10:
                data_rows.append({**row, "error": "not run: time budget spent"})
                continue
            try:
                row = loader_rate(
                    corpus_info["data_bin"],
                    family,
                    b,
                    t,
                    RECIPE_WORKERS[family],
                    max_batches=20 if args.quick else 200,
                    max_s=1.5 if args.quick else 15.0,
                )
            except Exception as exc:
                data_rows.append({**row, "error": f"FAILED {type(exc).__name__}: {exc}"[:300]})
                continue
            steps = [
                r["ms_per_step"]
                for r in speed_rows
                if r.get("size") == size
                and r.get("ms_per_step")
                and r.get("criterion") != "hf"
                and not r.get("error")
            ]
            if steps:
                row["steps_per_s"] = 1000.0 / min(steps)
                row["keeps_up"] = (
                    "yes"
                    if row["batches_per_s"] and row["batches_per_s"] >= row["steps_per_s"]
                    else "NO"
                )
            data_rows.append(row)
            print(
                f"[gpu-check] data pipeline {family} {b}x{t}: {_fmt(row['batches_per_s'])} batches/s",
                flush=True,
            )

        report = {
            "quick": args.quick,
            "budget_s": budget,
            "elapsed_s": time.perf_counter() - t_start,
            "command": "python benchmarks/gpu_check.py" + (" --quick" if args.quick else ""),
            "files": {
                "md": os.path.join(args.out_dir, "report.md"),
                "json": os.path.join(args.out_dir, "report.json"),
            },
            "device": device_info(),
            "corpus": corpus_info,
            "correctness": {
                "updates": updates,
                "tolerance": args.tolerance,
                "overall": overall,
                "models": corr_models,
            },
            "speed": {
                "peak_tflops": peak,
                "rounds": rounds,
                "warmup": warmup,
                "compile_backend": backend,
                "note": (
                    "Compiled rows use dynamo with the aot_eager backend (no generated code) on the CPU; "
                    "CUDA graphs need CUDA."
                    if not cuda
                    else "compiled: torch.compile (inductor) of the encoder stacks; graphs: mode=reduce-overhead."
                ),
                "rows": speed_rows,
            },
            "data_pipeline": {"rows": data_rows},
        }
    write_reports(out_dir, report)
    print(
        f"[gpu-check] {report['elapsed_s']:.0f} s; correctness {overall}; wrote {report['files']['md']} "
        f"and {report['files']['json']}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
