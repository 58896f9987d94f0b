#!/usr/bin/env python
"""Throughput of a CLINE training step (three sequences per example: masked x_ori, x_syn, x_ant
in one 3B x T encoder pass, MLM + RTD + contrastive) relative to a ``masked_lm`` step on the
same model and the same x_ori batches.

A step is forward + backward + Adam update; both criteria train one ``cline_roberta`` model (its
RTD head is simply unused by ``masked_lm``) and are timed alternately, so drift in machine speed
hits both alike. Throughput is in examples (x_ori sentences) per second.

With ``--backbone electra`` the model is ``cline_electra`` (discriminator --layers x --dim, a
generator of the same depth at a quarter of the width) and the baseline is the ``electra`` step
(generator MLM + RTD on sampled replacements) on the same x_ori batches.

  python benchmarks/cline_step.py                 # small RoBERTa 4 x 128, vocab 8,000, 32 x 128
  python benchmarks/cline_step.py --backbone electra
  python benchmarks/cline_step.py --layers 2 --dim 32 --ffn 64 --rounds 10   # tiny
"""

import argparse
import os
import platform
import statistics
import tempfile

from _common import (
    add_timing_args,
    alternating_step_times,
    make_batches,
    make_train_step,
    parse_timing_args,
)

BASELINE = {"roberta": "masked_lm", "electra": "electra"}


def model_args(backbone, layers, dim, ffn, heads, seq):
    if backbone == "electra":
        return [
            "--arch",
            "cline_electra_base",
            "--electra-embed-dim",
            str(dim),
            "--electra-hidden-dim",
            str(dim),
            "--electra-layers",
            str(layers),
            "--electra-heads",
            str(heads),
            "--electra-ffn-dim",
            str(ffn),
            "--electra-gen-hidden-dim",
            str(max(dim // 4, 16)),
            "--electra-gen-heads",
            "1",
            "--electra-gen-ffn-dim",
            str(max(ffn // 4, 16)),
            "--electra-max-positions",
            str(seq),
            "--tokens-per-sample",
            str(seq),
        ]
    return [
        "--arch",
        "cline_roberta_base",
        "--encoder-layers",
        str(layers),
        "--encoder-embed-dim",
        str(dim),
        "--encoder-ffn-embed-dim",
        str(ffn),
        "--encoder-attention-heads",
        str(heads),
        "--max-positions",
        str(seq),
        "--tokens-per-sample",
        str(seq),
    ]


def build(data_dir, backbone, layers, dim, ffn, heads, seq, seed=1):
    import torch
    from fairseq import options, tasks, utils
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401  (registration)

    arch = model_args(backbone, layers, dim, ffn, heads, seq)
    task = model = opt = None
    steps = {}
    for criterion in (BASELINE[backbone], "cline"):
        args = options.parse_args_and_arch(
            options.get_training_parser(),
            [
                data_dir,
                "--task",
                "cline",
                "--criterion",
                criterion,
                "--cpu",
                "--seed",
                str(seed),
                *arch,
            ],
        )
        cfg = dataclass_utils.convert_namespace_to_omegaconf(args)
        if task is None:
            utils.set_torch_seed(seed)
            task = tasks.setup_task(cfg.task)
            model = task.build_model(cfg.model).train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        steps[criterion] = make_train_step(model, task.build_criterion(cfg.criterion), opt)
    return task, steps


def add_triples(batches, vocab, nspecial, seed=0):
    """x_syn / x_ant: the original with ~40% / ~20% of the tokens replaced, labels to match."""
    import torch

    g = torch.Generator().manual_seed(seed)
    for b in batches:
        orig = b["original"]
        out = {}
        for name, rate in (("syn", 0.4), ("ant", 0.2)):
            rep = torch.rand(orig.shape, generator=g) < rate
            rep[:, 0] = rep[:, -1] = False
            rand = torch.randint(nspecial, vocab - 1, orig.shape, generator=g)
            out[f"{name}_tokens"] = torch.where(rep, rand, orig)
            out[f"{name}_labels"] = rep.long()
        out["has_negative"] = out["ant_labels"].gt(0).any(dim=1)
        b["cline"] = out
    return batches


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--backbone",
        choices=sorted(BASELINE),
        default="roberta",
        help="cline_roberta against masked_lm, or cline_electra against electra",
    )
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    add_timing_args(p, rounds=12, warmup=2, batches=4)
    args = parse_timing_args(p)

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        with open(
            os.path.join(tmp, "dict.txt"), "w"
        ) as f:  # a synthetic vocabulary of --vocab entries
            f.writelines(f"w{i} {args.vocab - i}\n" for i in range(args.vocab - 5))
        task, steps = build(
            tmp, args.backbone, args.layers, args.dim, args.ffn, args.heads, args.seq
        )
    d = task.source_dictionary
    batches = make_batches(
        args.batches,
        args.batch_size,
        args.seq,
        len(d),
        d.pad(),
        d.bos(),
        d.eos(),
        task.mask_idx,
        d.nspecial,
    )
    batches = add_triples(batches, len(d), d.nspecial)
    times = alternating_step_times(steps, batches, args.rounds, args.warmup)

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; cline_{args.backbone} {args.layers} x {args.dim} (FFN {args.ffn}), "
        f"vocab {len(d)}, batch {args.batch_size} x {args.seq} tokens, {args.rounds} rounds"
    )
    print(f"{'criterion':<12}{'median step ms':>16}{'examples/s':>12}{'ratio':>8}")
    base = None
    for c in (BASELINE[args.backbone], "cline"):
        med = statistics.median(times[c])
        eps = args.batch_size / med
        base = base or eps
        print(f"{c:<12}{med * 1000:>16.1f}{eps:>12.1f}{eps / base:>8.3f}")


if __name__ == "__main__":
    main()
