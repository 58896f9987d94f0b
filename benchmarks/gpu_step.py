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
  python benchmarks/gpu_step.py --sizes small --fairseq-train   # + a fairseq-train wps line
  python benchmarks/gpu_step.py --one small:mlm_hard_correction:compiled --json

Without a CUDA GPU it says so and exits 0; ``--device cpu --sizes tiny --rounds 2`` runs the
same code on the CPU as a smoke test (the numbers then mean nothing for a GPU).
"""

import argparse
import json
import logging
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from _common import hf_electra_loss, make_batches

from truneg_fairseq.models.sizes import BERT_SIZES, ELECTRA_SIZES

VOCAB = 30522  # ELECTRA (BERT's WordPiece vocabulary)
ROBERTA_VOCAB = 50265  # RoBERTa (GPT-2 byte-level BPE)
TINY_VOCAB = 1000  # the tiny smoke-test sizes


def _electra(arch: str, batch: int, seq: int) -> tuple:
    z = ELECTRA_SIZES[arch]
    return (
        z.embed,
        z.hidden,
        z.layers,
        z.heads,
        z.ffn,
        z.gen_hidden,
        z.gen_heads,
        z.gen_ffn,
        batch,
        seq,
    )


def _roberta(name: str, batch: int, seq: int) -> tuple:
    z = BERT_SIZES[name]
    return (z.dim, z.layers, z.heads, z.ffn, batch, seq)


# name: (embed, hidden, layers, heads, ffn, gen hidden, gen heads, gen ffn, batch, seq): the
# registered architectures' sizes (the one table, models/sizes.py) with the benchmark's batch shape
SIZES = {
    "small": _electra("electra_small", 128, 128),
    "base": _electra("electra_base", 32, 512),
    "tiny": _electra("electra_tiny", 8, 64),
}
# name: (hidden, layers, heads, ffn, batch, seq)
ROBERTA_SIZES = {
    "roberta-base": _roberta("base", 16, 512),
    "roberta-tiny": _roberta("tiny", 4, 64),
}
# dense bf16 peak TFLOP/s (no sparsity), by a substring of torch.cuda.get_device_name()
PEAK_TFLOPS = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "A10": 125.0,
    "4090": 165.0,
    "V100": 125.0,
}
CRITERIA = ["electra", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]
ROBERTA_CRITERIA = ["masked_lm", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]
MODES = ["dynamic", "static", "compiled", "graphs"]
JSON_TAG = "GPU_STEP_JSON "  # the line of a --json child that carries its result


def is_roberta(size: str) -> bool:
    return size in ROBERTA_SIZES


def batch_shape(size: str):
    """(batch, sequence length) of a size."""
    return ROBERTA_SIZES[size][4:6] if is_roberta(size) else SIZES[size][8:10]


def criteria_for(size: str):
    """The criteria of a model family, baseline first."""
    return ROBERTA_CRITERIA if is_roberta(size) else CRITERIA


def vocab_for(size: str) -> int:
    if size.endswith("tiny"):
        return TINY_VOCAB
    return ROBERTA_VOCAB if is_roberta(size) else VOCAB


def step_flops(size: str, mask_prob: float = 0.15) -> float:
    """Analytic FLOPs of one training step (forward + backward = 3x forward): the encoder
    stacks over every token, attention, the embedding projections, the (generator's) MLM head at
    the predicted positions only and, for ELECTRA, the discriminator head everywhere."""
    if is_roberta(size):
        h, layers, _, f, b, t = ROBERTA_SIZES[size]
        tokens, predicted = b * t, b * math.ceil((mask_prob + 0.005) * t)
        stack = 2 * tokens * layers * (4 * h * h + 2 * h * f + 2 * t * h)
        return 3.0 * (stack + 2 * predicted * (h * h + h * vocab_for(size)))
    e, h, layers, _, f, gh, _, gf, b, t = SIZES[size]
    tokens = b * t

    def stack(hidden, ffn):
        dense = layers * (4 * hidden * hidden + 2 * hidden * ffn) + (
            e * hidden if e != hidden else 0
        )
        attn = layers * 2 * t * hidden  # QK^T and AV per token
        return 2 * tokens * (dense + attn)

    predicted = b * math.ceil((mask_prob + 0.005) * t)
    gen_head = 2 * predicted * (gh * e + e * vocab_for(size))
    disc_head = 2 * tokens * (h * h + h)
    return 3.0 * (stack(h, f) + stack(gh, gf) + gen_head + disc_head)


def _model_args(size, criterion, slots, table):
    if is_roberta(size):
        h, layers, heads, f, _, t = ROBERTA_SIZES[size]
        args = [
            "--task",
            "masked_lm",
            "--arch",
            "truneg_roberta_base",
            "--criterion",
            criterion,
            "--encoder-layers",
            str(layers),
            "--encoder-embed-dim",
            str(h),
            "--encoder-ffn-embed-dim",
            str(f),
            "--encoder-attention-heads",
            str(heads),
            "--max-positions",
            str(t),
            "--tokens-per-sample",
            str(t),
        ]
        if criterion == "masked_lm":
            return args  # fairseq's own criterion: no prediction slots, no table
    else:
        e, h, layers, heads, f, gh, gheads, gf, _, t = SIZES[size]
        args = [
            "--task",
            "electra",
            "--arch",
            "electra_small",
            "--criterion",
            criterion,
            "--electra-embed-dim",
            str(e),
            "--electra-hidden-dim",
            str(h),
            "--electra-layers",
            str(layers),
            "--electra-heads",
            str(heads),
            "--electra-ffn-dim",
            str(f),
            "--electra-gen-hidden-dim",
            str(gh),
            "--electra-gen-heads",
            str(gheads),
            "--electra-gen-ffn-dim",
            str(gf),
            "--electra-max-positions",
            str(t),
            "--tokens-per-sample",
            str(t),
        ]
    args += ["--mlm-prediction-slots", slots]
    if criterion not in ("electra", "masked_lm"):
        args += ["--synonym-table", table]
    return args


def compile_model(model, mode, backend="inductor"):
    """torch.compile the encoder stacks: ELECTRA's own ``compile_encoders``, RoBERTa's
    sentence encoder (fairseq's; its ``padding_mask.any()`` splits it into a few graphs)."""
    if hasattr(model, "compile_encoders"):
        model.compile_encoders(mode=mode, backend=backend)
    else:
        model.encoder.sentence_encoder.compile(dynamic=False, mode=mode, backend=backend)


def plugin_setup(size, criterion, slots, compiled, work, table, device, backend="inductor"):
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.optim.fused_adamw import FusedAdamW, FusedAdamWConfig

    data = os.path.join(work, "roberta" if is_roberta(size) else "electra")
    args = [data, *_model_args(size, criterion, slots, table)]
    cfg = dataclass_utils.convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), args)
    )
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model).to(device).train()
    crit = task.build_criterion(cfg.criterion).to(device)
    if compiled:
        compile_model(model, compiled, backend)
    opt = FusedAdamW(
        FusedAdamWConfig(lr=[1e-4], fused_adamw_eps=1e-6, fused_adamw_weight_decay=0.01),
        list(model.parameters()),
    )

    def step(sample):
        opt.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss, _, _ = crit(model, sample)
        loss.backward()
        opt.clip_grad_norm(1.0)
        opt.step()

    return task, step


def hf_setup(size, pad, device):
    """The HuggingFace transformers step of the same network: ELECTRA generator + discriminator
    (shared embeddings, loss of :func:`hf_electra_loss`) or RobertaForMaskedLM."""
    import torch

    if is_roberta(size):
        from transformers import RobertaConfig, RobertaForMaskedLM

        h, layers, heads, f, _, t = ROBERTA_SIZES[size]
        model = (
            RobertaForMaskedLM(
                RobertaConfig(
                    vocab_size=vocab_for(size),
                    hidden_size=h,
                    num_hidden_layers=layers,
                    num_attention_heads=heads,
                    intermediate_size=f,
                    max_position_embeddings=t + pad + 1,
                    pad_token_id=pad,
                )
            )
            .to(device)
            .train()
        )
        params = list(model.parameters())

        def loss_fn(s):
            src, tgt = s["net_input"]["src_tokens"], s["target"]
            return model(
                input_ids=src,
                attention_mask=src.ne(pad).long(),
                labels=torch.where(tgt.ne(pad), tgt, -100),
            ).loss
    else:
        from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

        e, h, layers, heads, f, gh, gheads, gf, b, t = SIZES[size]
        common = dict(
            vocab_size=vocab_for(size),
            embedding_size=e,
            max_position_embeddings=t,
            pad_token_id=pad,
            num_hidden_layers=layers,
        )
        gen = ElectraForMaskedLM(
            ElectraConfig(
                hidden_size=gh, num_attention_heads=gheads, intermediate_size=gf, **common
            )
        )
        disc = ElectraForPreTraining(
            ElectraConfig(hidden_size=h, num_attention_heads=heads, intermediate_size=f, **common)
        )
        disc.electra.embeddings = gen.electra.embeddings
        gen.to(device).train()
        disc.to(device).train()
        params = list({id(p): p for m in (gen, disc) for p in m.parameters()}.values())

        def loss_fn(s):
            return hf_electra_loss(gen, disc, s, pad)

    opt = torch.optim.AdamW(
        params, lr=1e-4, eps=1e-6, weight_decay=0.01, fused=device.type == "cuda"
    )

    def step(s):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = loss_fn(s)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()

    return step


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


def write_table(work, table_path, vocab=VOCAB):
    """A dictionary of ``vocab`` symbols in ``work`` and a random synonym table for it (the speed
    of a step does not depend on which pairs are synonyms, only on how many)."""
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable, dictionary_fingerprint

    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "dict.txt"), "w") as f:
        for i in range(vocab - 5):
            f.write(f"w{i} 1\n")
    d = Dictionary.load(os.path.join(work, "dict.txt"))
    rng = np.random.default_rng(1)
    pairs = np.unique(rng.integers(d.nspecial, len(d), size=(35000, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]].astype(np.int64)
    SynonymTable(
        pairs,
        np.zeros(0, np.int64),
        len(d),
        dictionary_fingerprint(d.symbols),
        {"source": "random"},
    ).save(table_path)
    return d


def prepare_work(size, work):
    """The dictionary and synonym table a size needs under ``work``; returns the table's path."""
    sub = os.path.join(work, "roberta" if is_roberta(size) else "electra")
    table = os.path.join(sub, "synonyms.npz")
    if not os.path.isfile(table):
        write_table(sub, table, vocab_for(size))
    return table


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
            compile_mode = {"compiled": "default", "graphs": "reduce-overhead"}.get(mode)
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
        if mode in ("compiled", "graphs"):
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


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()})"


def peak_tflops(device, override=0.0) -> float:
    if override:
        return override
    if device.type != "cuda":
        return 0.0
    name = device_name(device)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)


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


def fairseq_train_wps(size, work, device, updates):
    """Binarize a random corpus and run fairseq-train with the recipe's fast flags; returns the
    words/s of the last log line."""
    e, h, layers, heads, f, gh, gheads, gf, b, t = SIZES[size]
    rng = np.random.default_rng(2)
    raw = os.path.join(work, "train.txt")
    with open(raw, "w") as fh:
        for _ in range(b * (updates + 20)):
            fh.write(" ".join(f"w{i}" for i in rng.integers(0, VOCAB - 6, size=t - 2)) + "\n")
    data = os.path.join(work, "bin")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fairseq_cli.preprocess",
            "--only-source",
            "--trainpref",
            raw,
            "--validpref",
            raw,
            "--srcdict",
            os.path.join(work, "dict.txt"),
            "--destdir",
            data,
            "--workers",
            "4",
        ],
        check=True,
        capture_output=True,
    )
    user_dir = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "truneg_fairseq"
    )
    cmd = [
        sys.executable,
        "-m",
        "fairseq_cli.train",
        data,
        "--user-dir",
        user_dir,
        "--task",
        "electra",
        "--arch",
        "electra_small",
        "--criterion",
        "electra",
        "--electra-embed-dim",
        str(e),
        "--electra-hidden-dim",
        str(h),
        "--electra-layers",
        str(layers),
        "--electra-heads",
        str(heads),
        "--electra-ffn-dim",
        str(f),
        "--electra-gen-hidden-dim",
        str(gh),
        "--electra-gen-heads",
        str(gheads),
        "--electra-gen-ffn-dim",
        str(gf),
        "--electra-max-positions",
        str(t),
        "--tokens-per-sample",
        str(t),
        "--sample-break-mode",
        "none",
        "--batch-size",
        str(b),
        "--required-batch-size-multiple",
        "1",
        "--mlm-prediction-slots",
        "static",
        "--electra-bf16-autocast",
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
        "--lr-scheduler",
        "polynomial_decay",
        "--warmup-updates",
        "10",
        "--total-num-update",
        str(updates),
        "--max-update",
        str(updates),
        "--log-format",
        "simple",
        "--log-interval",
        str(max(1, min(50, updates // 4))),
        "--no-save",
        "--disable-validation",
        "--num-workers",
        "2",
    ]
    if device.type != "cuda":
        cmd.append("--cpu")
    out = subprocess.run(cmd, capture_output=True, text=True)
    wps = re.findall(r"wps[= ]([\d.]+)", out.stdout + out.stderr)
    if out.returncode != 0 or not wps:
        return None, (out.stdout + out.stderr)[-2000:]
    return float(wps[-1]), " ".join(cmd[3:])


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
        "with mode=reduce-overhead: the stacks replayed as CUDA graphs)",
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
            if args.fairseq_train and not is_roberta(size):
                b, t = batch_shape(size)
                prepare_work(size, work)
                wps, info = fairseq_train_wps(
                    size, os.path.join(work, "electra"), device, args.fairseq_train_updates
                )
                results.append(
                    {
                        "config": f"{size}:fairseq-train (recipe flags) wps={wps}",
                        "ms_per_step": (b * t / wps) if wps else None,
                        "tokens_per_s": wps,
                        "flops_per_step": step_flops(size),
                        "error": None if wps else f"FAILED: {info}",
                    }
                )
        print(format_rows(results, peak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
