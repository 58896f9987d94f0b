#!/usr/bin/env python
"""The HuggingFace path's training step (truneg_fairseq.hf) against the plain transformers MLM
step, on the same model and the same masked batches, one process on the CPU.

Model: BertForMaskedLM, BERT-mini sizes by default (4 layers x 256, 4 heads, FFN 1024) with
BERT's vocabulary size (30,522 entries: the specials, WordNet lemma names as whole words, and
continuation pieces), so that the synonym table is a real WordNet table of that vocabulary.
Batches: rows of random whole words, masked by MaskedLMCollator (15%, 80/10/10, static slots).
A step is forward + backward + AdamW step:

* ``plain``: ``model(input_ids, attention_mask, labels=labels).loss`` (transformers' own MLM
  loss: logits at every position);
* ``mlm``, ``hard_correction``, ``soft_reg``, ``sent_kl``: ``TrueNegativeMLM(model, ...)``, the
  loss divided by the masked tokens, and the step's statistics added up on the device as
  TrueNegativeTrainer does.

The configurations alternate every round (rotating order); the median and the fastest step time
are reported with their ratios to ``plain`` (on a shared machine the fastest is the steadier).

  python benchmarks/hf_step.py --rounds 12 --threads 2
"""

import argparse
import os
import platform
import statistics
import tempfile

from _common import add_timing_args, alternating_step_times, parse_timing_args

VOCAB = 30522
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def make_vocab(wn, size: int):
    words = sorted({n for n in wn.all_lemma_names() if n.isascii() and n.isalpha() and n.islower()})
    pieces = [f"##{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "aeiou"]
    words = words[: size - len(SPECIALS) - len(pieces)]
    return SPECIALS + words + pieces


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_timing_args(p, rounds=10, warmup=2, batches=4, batch_size=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    args = parse_timing_args(p)

    import numpy as np
    import torch
    import transformers

    from truneg_fairseq.hf import (
        MaskedLMCollator,
        StatSums,
        TrueNegativeMLM,
        build_synonym_table,
    )
    from truneg_fairseq.lexicon import load_wordnet

    wn = load_wordnet()
    vocab = make_vocab(wn, VOCAB)
    work = tempfile.mkdtemp(prefix="hf_step_")
    cfg = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq),
    )
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(cfg)
    model.save_pretrained(work)
    with open(os.path.join(work, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    tok = transformers.AutoTokenizer.from_pretrained(work)
    table, _ = build_synonym_table(tok, wn=wn)

    rng = np.random.default_rng(0)
    word_ids = np.arange(len(SPECIALS), len(vocab) - 130)
    collator = MaskedLMCollator(tok)
    batches = []
    for b in range(args.batches):
        rows = rng.choice(word_ids, size=(args.batch_size, args.seq - 2))
        feats = [
            {"input_ids": [tok.cls_token_id, *r.tolist(), tok.sep_token_id], "index": b * 1000 + i}
            for i, r in enumerate(rows)
        ]
        batches.append(collator(feats))

    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    sums = StatSums()

    def plain(batch):
        out = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        )
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def ours(objective):
        obj = TrueNegativeMLM(model, tok, objective, table)

        def step(batch):
            out = obj(**batch)
            (out["loss"] / out["sample_size"]).backward()
            sums.add(out["logging"])
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    steps = {"plain": plain}
    for objective in ("mlm", "hard_correction", "soft_reg", "sent_kl"):
        steps[objective] = ours(objective)
    model.train()
    times = alternating_step_times(steps, batches, args.rounds, args.warmup)
    sums.pop()
    base = statistics.median(times["plain"])
    print(
        f"BertForMaskedLM {args.layers} x {args.hidden}, vocab {len(vocab)}, batch "
        f"{args.batch_size} x {args.seq}, {len(table)} synonym pairs; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, {torch.get_num_threads()} threads, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"{args.rounds} rounds"
    )
    fastest = min(times["plain"])
    print(f"{'step':<18}{'median ms':>10}{'vs plain':>10}{'min ms':>10}{'vs plain':>10}")
    for name, ts in times.items():
        med, low = statistics.median(ts), min(ts)
        print(
            f"{name:<18}{1000 * med:>10.1f}{med / base:>10.3f}{1000 * low:>10.1f}{low / fastest:>10.3f}"
        )


if __name__ == "__main__":
    main()
