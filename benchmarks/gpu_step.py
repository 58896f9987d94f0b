#!/usr/bin/env python
"""ELECTRA pre-training step on a CUDA GPU: eager vs static slots vs compiled, bf16, each
criterion, with a HuggingFace transformers ELECTRA step on the same batches for reference.

For every configuration it prints the median ms/step (forward + backward + clipping + fused
AdamW update, all on the GPU, synchronised once per timed step), tokens/s, the analytic FLOPs of
the step and the model-FLOPs utilisation (MFU) against the device's dense bf16 peak.

  python benchmarks/gpu_step.py                       # ELECTRA-small 128 x 128 and base 32 x 512
  python benchmarks/gpu_step.py --sizes small --fairseq-train   # + a fairseq-train wps line

Without a CUDA GPU it says so and exits 0; ``--device cpu --sizes tiny --rounds 2`` runs the
same code on the CPU as a smoke test (the numbers then mean nothing for a GPU).
"""

import argparse
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import hf_electra_loss, make_batches  # noqa: E402

VOCAB = 30522
# name: (embed, hidden, layers, heads, ffn, gen hidden, gen heads, gen ffn, batch, seq)
SIZES = {
    "small": (128, 256, 12, 4, 1024, 64, 1, 256, 128, 128),
    "base": (768, 768, 12, 12, 3072, 256, 4, 1024, 32, 512),
    "tiny": (32, 64, 2, 2, 128, 32, 1, 64, 8, 64),
}
# dense bf16 peak TFLOP/s (no sparsity), by a substring of torch.cuda.get_device_name()
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0, "4090": 165.0, "V100": 125.0}
CRITERIA = ["electra", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]


def step_flops(size: str, mask_prob: float = 0.15) -> float:
    """Analytic FLOPs of one training step (forward + backward = 3x forward): both encoder
    stacks over every token, attention, the embedding projections, the generator head at the
    predicted positions only and the discriminator head everywhere."""
    e, h, layers, _, f, gh, _, gf, b, t = SIZES[size]
    tokens = b * t

    def stack(hidden, ffn):
        dense = layers * (4 * hidden * hidden + 2 * hidden * ffn) + (e * hidden if e != hidden else 0)
        attn = layers * 2 * t * hidden  # QK^T and AV per token
        return 2 * tokens * (dense + attn)

    predicted = b * math.ceil((mask_prob + 0.005) * t)
    gen_head = 2 * predicted * (gh * e + e * VOCAB)
    disc_head = 2 * tokens * (h * h + h)
    return 3.0 * (stack(h, f) + stack(gh, gf) + gen_head + disc_head)


def plugin_setup(size, criterion, slots, compiled, work, table, device):
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass import utils as dataclass_utils  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.optim.fused_adamw import FusedAdamW, FusedAdamWConfig

    e, h, layers, heads, f, gh, gheads, gf, b, t = SIZES[size]
    args = [work, "--task", "electra", "--arch", "electra_small", "--criterion", criterion,
            "--electra-embed-dim", str(e), "--electra-hidden-dim", str(h), "--electra-layers", str(layers),
            "--electra-heads", str(heads), "--electra-ffn-dim", str(f), "--electra-gen-hidden-dim", str(gh),
            "--electra-gen-heads", str(gheads), "--electra-gen-ffn-dim", str(gf),
            "--electra-max-positions", str(t), "--tokens-per-sample", str(t),
            "--mlm-prediction-slots", slots]
    if criterion != "electra":
        args += ["--synonym-table", table]
    cfg = dataclass_utils.convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), args))
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model).to(device).train()
    crit = task.build_criterion(cfg.criterion).to(device)
    if compiled:
        model.compile_encoders(mode=compiled)
    opt = FusedAdamW(FusedAdamWConfig(lr=[1e-4], fused_adamw_eps=1e-6, fused_adamw_weight_decay=0.01),
                     list(model.parameters()))

    def step(sample):
        opt.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss, _, _ = crit(model, sample)
        loss.backward()
        opt.clip_grad_norm(1.0)
        opt.step()

    return task, step


def hf_setup(size, pad, device):
    import torch
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    e, h, layers, heads, f, gh, gheads, gf, b, t = SIZES[size]
    common = dict(vocab_size=VOCAB, embedding_size=e, max_position_embeddings=t, pad_token_id=pad,
                  num_hidden_layers=layers)
    gen = ElectraForMaskedLM(ElectraConfig(hidden_size=gh, num_attention_heads=gheads, intermediate_size=gf, **common))
    disc = ElectraForPreTraining(ElectraConfig(hidden_size=h, num_attention_heads=heads, intermediate_size=f, **common))
    disc.electra.embeddings = gen.electra.embeddings
    gen.to(device).train()
    disc.to(device).train()
    params = list({id(p): p for m in (gen, disc) for p in m.parameters()}.values())
    opt = torch.optim.AdamW(params, lr=1e-4, eps=1e-6, weight_decay=0.01, fused=device.type == "cuda")

    def step(s):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = hf_electra_loss(gen, disc, s, pad)
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


def write_table(work, table_path):
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable, dictionary_fingerprint

    with open(os.path.join(work, "dict.txt"), "w") as f:
        for i in range(VOCAB - 5):
            f.write(f"w{i} 1\n")
    d = Dictionary.load(os.path.join(work, "dict.txt"))
    rng = np.random.default_rng(1)
    pairs = np.unique(rng.integers(d.nspecial, len(d), size=(35000, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]].astype(np.int64)
    SynonymTable(pairs, np.zeros(0, np.int64), len(d), dictionary_fingerprint(d.symbols), {"source": "random"}).save(table_path)
    return d


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
    subprocess.run([sys.executable, "-m", "fairseq_cli.preprocess", "--only-source", "--trainpref", raw,
                    "--validpref", raw, "--srcdict", os.path.join(work, "dict.txt"), "--destdir", data,
                    "--workers", "4"], check=True, capture_output=True)
    user_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "truneg_fairseq")
    cmd = [sys.executable, "-m", "fairseq_cli.train", data, "--user-dir", user_dir, "--task", "electra",
           "--arch", "electra_small", "--criterion", "electra", "--electra-embed-dim", str(e),
           "--electra-hidden-dim", str(h), "--electra-layers", str(layers), "--electra-heads", str(heads),
           "--electra-ffn-dim", str(f), "--electra-gen-hidden-dim", str(gh), "--electra-gen-heads", str(gheads),
           "--electra-gen-ffn-dim", str(gf), "--electra-max-positions", str(t), "--tokens-per-sample", str(t),
           "--sample-break-mode", "none", "--batch-size", str(b), "--required-batch-size-multiple", "1",
           "--mlm-prediction-slots", "static", "--electra-bf16-autocast", "--optimizer", "fused_adamw",
           "--fused-adamw-eps", "1e-6", "--fused-adamw-weight-decay", "0.01", "--clip-norm", "1.0",
           "--lr", "5e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10",
           "--total-num-update", str(updates), "--max-update", str(updates), "--log-format", "simple",
           "--log-interval", str(max(1, min(50, updates // 4))), "--no-save", "--disable-validation", "--num-workers", "2"]
    if device.type != "cuda":
        cmd.append("--cpu")
    out = subprocess.run(cmd, capture_output=True, text=True)
    wps = re.findall(r"wps[= ]([\d.]+)", out.stdout + out.stderr)
    if out.returncode != 0 or not wps:
        return None, (out.stdout + out.stderr)[-2000:]
    return float(wps[-1]), " ".join(cmd[3:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="small,base", help="comma list of: small, base, tiny")
    p.add_argument("--criteria", default=",".join(CRITERIA))
    p.add_argument("--modes", default="dynamic,static,compiled,graphs",
                   help="dynamic (boolean-mask positions, eager), static (fixed slots, eager), "
                        "compiled (fixed slots, encoder stacks torch.compile'd), graphs (compiled "
                        "with mode=reduce-overhead: the stacks replayed as CUDA graphs)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="cuda")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="override the device's dense bf16 peak")
    p.add_argument("--no-hf", action="store_true", help="skip the transformers reference step")
    p.add_argument("--fairseq-train", action="store_true", help="also time fairseq-train with the recipe flags")
    p.add_argument("--fairseq-train-updates", type=int, default=300)
    args = p.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: nothing measured (use --device cpu --sizes tiny for a smoke run)")
        return 0
    device = torch.device(args.device)
    name = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or platform.machine()
    peak = args.peak_tflops or next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)
    print(f"device: {name}; torch {torch.__version__}; peak {peak or '?'} TFLOP/s (bf16 dense)")

    work = tempfile.mkdtemp(prefix="gpu_step_")
    table = os.path.join(work, "synonyms.npz")
    write_table(work, table)
    rows = []
    for size in args.sizes.split(","):
        _, _, _, _, _, _, _, _, b, t = SIZES[size]
        flops = step_flops(size)
        batches = None
        for criterion in args.criteria.split(","):
            for mode in args.modes.split(","):
                slots = "dynamic" if mode == "dynamic" else "static"
                try:
                    compile_mode = {"compiled": "default", "graphs": "reduce-overhead"}.get(mode)
                    task, step = plugin_setup(size, criterion, slots, compile_mode, work, table, device)
                    if batches is None:
                        td = task.source_dictionary
                        batches = make_batches(4, b, t, VOCAB, td.pad(), td.bos(), td.eos(), task.mask_idx,
                                               td.nspecial, device=device)
                    sec = time_steps(step, batches, args.rounds, args.warmup, device)
                    rows.append((size, f"plugin {criterion} {mode}", sec, flops))
                except Exception as exc:  # report and go on: one failing mode must not hide the others
                    rows.append((size, f"plugin {criterion} {mode}: FAILED {type(exc).__name__}: {exc}"[:160], None, flops))
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        if not args.no_hf:
            try:
                step = hf_setup(size, 1, device)
                rows.append((size, "HF transformers eager", time_steps(step, batches, args.rounds, args.warmup, device), flops))
            except ImportError:
                rows.append((size, "HF transformers: not installed", None, flops))
        if args.fairseq_train:
            wps, info = fairseq_train_wps(size, work, device, args.fairseq_train_updates)
            rows.append((size, f"fairseq-train (recipe flags) wps={wps}" if wps else f"fairseq-train FAILED: {info}",
                         (b * t / wps) if wps else None, flops))

    print(f"{'size':<6}{'configuration':<44}{'ms/step':>10}{'tokens/s':>12}{'TFLOP/step':>12}{'MFU %':>8}")
    for size, what, sec, flops in rows:
        b, t = SIZES[size][8], SIZES[size][9]
        if sec is None:
            print(f"{size:<6}{what}")
            continue
        mfu = 100 * flops / sec / (peak * 1e12) if peak else float("nan")
        print(f"{size:<6}{what:<44}{sec * 1000:>10.1f}{b * t / sec:>12.0f}{flops / 1e12:>12.3f}{mfu:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
