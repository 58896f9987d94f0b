#!/usr/bin/env python
"""Training-step throughput of each counter-false-negative criterion relative to fairseq's
masked_lm, in one process, on the same small RoBERTa and the same batches.

A step is forward + backward + Adam update. Criteria are measured alternately (the order rotates
every round) so that drift in machine speed hits all of them alike; words/s uses fairseq's
``ntokens`` and the median step time.

  python benchmarks/criterion_overhead.py            # builds/reuses benchmarks/.cache/wn8k
  python benchmarks/criterion_overhead.py --rounds 30 --batch-size 32 --threads 2
"""

import argparse
import os
import platform
import statistics

from _common import (
    REPO,
    add_timing_args,
    alternating_step_times,
    ensure_corpus,
    make_train_step,
    parse_timing_args,
)

CRITERIA = ["masked_lm", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]
TARGETS = {"mlm_hard_correction": 0.98, "mlm_soft_reg": 0.97, "mlm_sent_kl": 0.40}
ARCH = [
    "--arch",
    "truneg_roberta_base",
    "--encoder-layers",
    "4",
    "--encoder-embed-dim",
    "128",
    "--encoder-ffn-embed-dim",
    "512",
    "--encoder-attention-heads",
    "4",
    "--max-positions",
    "128",
    "--tokens-per-sample",
    "128",
]


def build(data_bin, table, seed=1):
    """One small RoBERTa and optimizer shared by every criterion (timed on the same memory);
    returns (task, {criterion: training-step function})."""
    import torch
    from fairseq import options, tasks, utils
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401

    task = model = opt = None
    steps = {}
    for criterion in CRITERIA:
        extra = [] if criterion == "masked_lm" else ["--synonym-table", table]
        args = options.parse_args_and_arch(
            options.get_training_parser(),
            [
                data_bin,
                "--task",
                "masked_lm",
                "--criterion",
                criterion,
                "--cpu",
                "--seed",
                str(seed),
                *ARCH,
                *extra,
            ],
        )
        cfg = dataclass_utils.convert_namespace_to_omegaconf(args)
        if task is None:
            utils.set_torch_seed(seed)
            task = tasks.setup_task(cfg.task)
            model = task.build_model(cfg.model).train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        crit = task.build_criterion(cfg.criterion)
        steps[criterion] = make_train_step(model, crit, opt)
    return task, steps


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workdir", default=os.path.join(REPO, "benchmarks", ".cache", "wn8k"))
    add_timing_args(p, rounds=20, warmup=3, batches=8)
    args = parse_timing_args(p)

    import torch

    data_bin = ensure_corpus(args.workdir, 8000)
    table = os.path.join(data_bin, "synonyms.npz")
    task, steps = build(data_bin, table)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    bs = args.batch_size
    batches = [
        ds.collater([ds[i] for i in range(k * bs, (k + 1) * bs)])
        for k in range(min(args.batches, len(ds) // bs))
    ]

    times = alternating_step_times(steps, batches, args.rounds, args.warmup)
    ntok = statistics.mean(b["ntokens"] for b in batches)

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; small RoBERTa (4 x 128, FFN 512), vocab {len(task.source_dictionary)}, "
        f"batch {bs} x 128 tokens, {args.rounds} rounds"
    )
    base = None
    print(f"{'criterion':<22}{'median step ms':>16}{'words/s':>12}{'ratio':>8}{'target':>8}")
    for c in CRITERIA:
        med = statistics.median(times[c])
        wps = ntok / med
        base = base or wps
        ratio = wps / base
        tgt = TARGETS.get(c)
        mark = "" if tgt is None else (" ok" if ratio >= tgt else " BELOW")
        print(
            f"{c:<22}{med * 1000:>16.1f}{wps:>12.0f}{ratio:>8.3f}{(f'>={tgt}' if tgt else '-'):>8}{mark}"
        )


if __name__ == "__main__":
    main()
