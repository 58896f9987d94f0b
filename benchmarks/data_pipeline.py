"""Milliseconds to make one masked-LM training batch on one CPU core (what one loader worker
spends per batch): fairseq's ``masked_lm`` (item by item) beside the plugin's batched path
(``--task batch_masked_lm``, and ``--task electra`` with ELECTRA's masking), on the same
binarized WordNet-gloss corpus in the same run, at 128 x 128 and 32 x 512 tokens.

    python benchmarks/data_pipeline.py [--workdir DIR] [--batches 40]

A batch is timed from its block indices to the collated sample (reading, masking, padding), as
fairseq's loader makes it: ``dataset[i]`` for each index, then ``collater``.
"""

import argparse
import logging
import os
import tempfile
import time

import numpy as np
import torch
from _common import ensure_corpus


def build(task_name, data_bin, tokens):
    from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

    from truneg_fairseq.tasks.batch_masked_lm import BatchMaskedLMConfig, BatchMaskedLMTask
    from truneg_fairseq.tasks.electra import ElectraTask, ElectraTaskConfig

    cls, config, extra = {
        "masked_lm (fairseq)": (MaskedLMTask, MaskedLMConfig, {}),
        "batch_masked_lm": (BatchMaskedLMTask, BatchMaskedLMConfig, {}),
        "electra": (ElectraTask, ElectraTaskConfig, {}),
    }[task_name]
    task = cls.setup_task(config(data=data_bin, tokens_per_sample=tokens, seed=1, **extra))
    task.load_dataset("train")
    ds = task.dataset("train")
    ds.set_epoch(1)
    return ds


def time_batches(ds, bsz, n, rounds):
    """Median ms per batch over ``rounds`` passes of ``n`` distinct full batches."""
    sizes = ds.sizes[0] if isinstance(ds.sizes, list) else ds.sizes  # masked_lm: [sizes]
    full = np.flatnonzero(sizes == sizes.max())
    rng = np.random.default_rng(0)
    batches = [rng.choice(full, bsz, replace=False).tolist() for _ in range(n)]
    ds.collater([ds[i] for i in batches[0]])  # warm-up
    per_round = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for b in batches:
            ds.collater([ds[i] for i in b])
        per_round.append((time.perf_counter() - t0) / n * 1e3)
    return float(np.median(per_round))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", help="corpus directory (default: a new temporary one)")
    p.add_argument("--max-lines", type=int, default=60000)
    p.add_argument("--batches", type=int, default=40, help="distinct batches per round")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)
    import truneg_fairseq  # noqa: F401  (registration)

    workdir = args.workdir or tempfile.mkdtemp(prefix="data_pipeline_")
    data_bin = ensure_corpus(workdir, vocab_size=8000, max_lines=args.max_lines)
    print(
        f"corpus: {data_bin}; ms per batch on one core (median of {args.rounds} rounds of {args.batches} batches)"
    )
    print(f"{'pipeline':22s} {'128 x 128':>10s} {'32 x 512':>10s}")
    results = {}
    for name in ("masked_lm (fairseq)", "batch_masked_lm", "electra"):
        row = [
            time_batches(build(name, data_bin, tokens), bsz, args.batches, args.rounds)
            for bsz, tokens in ((128, 128), (32, 512))
        ]
        results[name] = row
        print(f"{name:22s} {row[0]:10.2f} {row[1]:10.2f}")
    ref = results["masked_lm (fairseq)"]
    for name in ("batch_masked_lm", "electra"):
        print(
            f"{name}: {100 * results[name][0] / ref[0]:.1f}% / {100 * results[name][1] / ref[1]:.1f}% of fairseq's time"
        )
    print(f"threads: {torch.get_num_threads()}, cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
