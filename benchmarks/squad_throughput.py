#!/usr/bin/env python
"""SQuAD v1.1 preprocessing throughput (questions/s) and the fine-tuning step of an ELECTRA-small
span model (tokens/s) on this machine.

Data: SQuAD-shaped examples made from the WordNet-gloss corpus (contexts of ~150 words, the
question a gloss, the answer a 1-4 word span of the context), the 8k sentencepiece model of
benchmarks/.cache/wn8k (prepared once). Windows of 384 tokens, stride 128, query 64.

  python benchmarks/squad_throughput.py --questions 2000 --steps 5
"""

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time

from _common import REPO, ensure_corpus, make_train_step


def make_squad(raw_lines, n, rng):
    data, paras = [], []
    for q in range(n):
        ctx = " ".join(rng.sample(raw_lines, 8))
        words = ctx.split()
        i = rng.randrange(0, max(1, len(words) - 4))
        ans = " ".join(words[i : i + rng.randint(1, 4)])
        start = len(" ".join(words[:i])) + (1 if i else 0)
        paras.append(
            {
                "context": ctx,
                "qas": [
                    {
                        "id": f"q{q}",
                        "question": rng.choice(raw_lines),
                        "answers": [{"text": ans, "answer_start": start}],
                    }
                ],
            }
        )
    data.append({"title": "bench", "paragraphs": paras})
    return {"version": "1.1", "data": data}


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workdir", default=os.path.join(REPO, "benchmarks", ".cache", "wn8k"))
    p.add_argument("--questions", type=int, default=2000)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32, help="windows per fine-tuning step")
    args = p.parse_args()

    import torch
    from fairseq import options, tasks
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.data import squad_windows as squad

    data_bin = ensure_corpus(args.workdir, 8000)
    with open(os.path.join(args.workdir, "raw", "train.txt"), encoding="utf-8") as f:
        raw = [line.strip() for line in f][:50000]
    work = tempfile.mkdtemp(prefix="squad_bench_")
    with (
        open(os.path.join(data_bin, "dict.txt")) as src,
        open(os.path.join(work, "dict.txt"), "w") as dst,
    ):
        dst.write(src.read())
    with open(os.path.join(work, "train.json"), "w") as f:
        json.dump(make_squad(raw, args.questions, random.Random(1)), f)

    argv = [
        work,
        "--task",
        "squad",
        "--criterion",
        "squad",
        "--arch",
        "electra_small",
        "--cpu",
        "--squad-spm-model",
        os.path.join(args.workdir, "spm.model"),
        "--electra-max-positions",
        "512",
    ]
    cfg = dataclass_utils.convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), argv)
    )
    task = tasks.setup_task(cfg.task)
    examples = squad.load_squad_json(os.path.join(work, "train.json"))
    t0 = time.perf_counter()
    data = squad.build_features(examples, task.word_tokenizer(), 384, 128, 64, train=True)
    prep = time.perf_counter() - t0

    task.load_dataset("train")
    ds = task.dataset("train")
    model = task.build_model(cfg.model).train()
    crit = task.build_criterion(cfg.criterion)
    step = make_train_step(model, crit, torch.optim.Adam(model.parameters(), lr=1e-4))
    batches = [
        ds.collater([ds[i] for i in range(k * args.batch_size, (k + 1) * args.batch_size)])
        for k in range(2)
    ]
    step(batches[0])  # warm-up
    times, ntok = [], []
    for k in range(args.steps):
        b = batches[k % 2]
        t0 = time.perf_counter()
        step(b)
        times.append(time.perf_counter() - t0)
        ntok.append(b["ntokens"])
    med = statistics.median(times)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(
        f"preprocessing: {len(data.examples)} questions -> {len(data.features)} windows in {prep:.2f} s: "
        f"{len(data.examples) / prep:.0f} questions/s"
    )
    print(
        f"fine-tuning step, ELECTRA-small + span head, {args.batch_size} windows (up to 384 tokens): "
        f"median {med * 1000:.0f} ms, {statistics.mean(ntok) / med:.0f} tokens/s"
    )


if __name__ == "__main__":
    main()
