#!/usr/bin/env python
"""ELECTRA-small pre-training step: this plugin vs HuggingFace transformers, one process.

Both sides: generator (hidden 64, 1 head, FFN 256, 12 layers) + discriminator (hidden 256, 4
heads, FFN 1024, 12 layers), 128-d embeddings shared by both, generator output tied to the token
embedding, vocabulary 30,522, the same pre-masked batches (15% selected: 85% <mask>, 15% kept),
replacements sampled from the generator softmax (temperature 1) without gradient, loss =
generator MLM + 50 x discriminator BCE, Adam. A step is forward + backward + optimizer step.
Configurations alternate every round (rotating order) and the median step time is reported.

Also prints the overhead of mlm_hard_correction and mlm_soft_reg over the plugin's electra
criterion on the same model and batches (target <= 2%).

  pip install -r requirements-bench.txt     # transformers, only for this benchmark
  python benchmarks/electra_vs_hf.py --rounds 10
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile

import numpy as np
from _common import (
    alternating_step_times,
    hf_electra_loss,
    make_batches,
    make_train_step,
)

from truneg_fairseq.models.sizes import ELECTRA_SIZES  # noqa: E402

VOCAB = 30522


def build_plugin(criteria, table_path, dict_dir):
    """One ELECTRA-small model and optimizer, one training-step function per criterion (the
    criteria share the model so that they are timed on the same memory)."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401

    task = model = opt = None
    steps = {}
    for criterion in criteria:
        extra = ["--synonym-table", table_path] if criterion != "electra" else []
        args = options.parse_args_and_arch(
            options.get_training_parser(),
            [
                dict_dir,
                "--task",
                "electra",
                "--arch",
                "electra_small",
                "--criterion",
                criterion,
                "--electra-max-positions",
                "128",
                "--tokens-per-sample",
                "128",
                "--cpu",
                *extra,
            ],
        )
        cfg = dataclass_utils.convert_namespace_to_omegaconf(args)
        if task is None:
            task = tasks.setup_task(cfg.task)
            model = task.build_model(cfg.model).train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        crit = task.build_criterion(cfg.criterion)
        steps[f"plugin {criterion}"] = make_train_step(model, crit, opt)
    return task, steps


def build_hf(pad, mask_idx):
    import torch
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    small = ELECTRA_SIZES["electra_small"]  # what --arch electra_small builds on the plugin's side
    common = dict(
        vocab_size=VOCAB,
        embedding_size=small.embed,
        max_position_embeddings=128,
        pad_token_id=pad,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        num_hidden_layers=small.layers,
    )
    gen = ElectraForMaskedLM(
        ElectraConfig(
            hidden_size=small.gen_hidden,
            num_attention_heads=small.gen_heads,
            intermediate_size=small.gen_ffn,
            **common,
        )
    )
    disc = ElectraForPreTraining(
        ElectraConfig(
            hidden_size=small.hidden,
            num_attention_heads=small.heads,
            intermediate_size=small.ffn,
            **common,
        )
    )
    disc.electra.embeddings = gen.electra.embeddings  # shared token/position embeddings
    assert gen.generator_lm_head.weight is gen.electra.embeddings.word_embeddings.weight  # tied
    params = {id(p): p for m in (gen, disc) for p in m.parameters()}
    opt = torch.optim.Adam(list(params.values()), lr=1e-4)
    gen.train()
    disc.train()

    def step(b):
        opt.zero_grad(set_to_none=True)
        hf_electra_loss(gen, disc, b, pad).backward()
        opt.step()

    return step


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import transformers
    except ImportError:
        sys.exit(
            "error: this benchmark compares with HuggingFace transformers: pip install -r requirements-bench.txt"
        )

    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable, dictionary_fingerprint

    # a 30,522-entry dictionary (incl. <mask>)
    work = tempfile.mkdtemp(prefix="electra_bench_")
    with open(os.path.join(work, "dict.txt"), "w") as f:
        for i in range(VOCAB - 5):
            f.write(f"w{i} 1\n")
    d = Dictionary.load(os.path.join(work, "dict.txt"))
    table = os.path.join(work, "synonyms.npz")
    # a WordNet-sized table (about 35k pairs) so the lookup costs what it costs in practice
    rng = np.random.default_rng(1)
    pairs = np.unique(rng.integers(d.nspecial, len(d), size=(35000, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    empty = np.zeros(0, np.int64)
    SynonymTable(
        pairs.astype(np.int64),
        empty,
        len(d),
        dictionary_fingerprint(d.symbols),
        {"source": "random"},
    ).save(table)

    task, setups = build_plugin(["electra", "mlm_hard_correction", "mlm_soft_reg"], table, work)
    setups["HF transformers"] = build_hf(task.source_dictionary.pad(), task.mask_idx)
    td = task.source_dictionary
    batches = make_batches(
        args.batches,
        args.batch_size,
        args.seq,
        len(td),
        td.pad(),
        td.bos(),
        td.eos(),
        task.mask_idx,
        td.nspecial,
    )

    names = list(setups)
    times = alternating_step_times(setups, batches, args.rounds, args.warmup)

    ntok = args.batch_size * args.seq
    med = {n: statistics.median(times[n]) for n in names}
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"transformers {transformers.__version__}; ELECTRA-small, vocab {VOCAB}, batch {args.batch_size} x {args.seq}, "
        f"{args.rounds} rounds"
    )
    print(f"{'configuration':<30}{'median step ms':>16}{'tokens/s':>10}")
    for n in names:
        print(f"{n:<30}{med[n] * 1000:>16.1f}{ntok / med[n]:>10.0f}")
    speedup = med["HF transformers"] / med["plugin electra"]
    print(f"plugin / HF tokens/s: {speedup:.2f}x (target >= 1.3x)")
    for crit in ("mlm_hard_correction", "mlm_soft_reg"):
        over = med[f"plugin {crit}"] / med["plugin electra"] - 1
        print(f"{crit} overhead over electra: {100 * over:+.1f}% (target <= 2%)")


if __name__ == "__main__":
    main()
