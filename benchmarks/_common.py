"""Shared set-up for the benchmarks: a binarized WordNet-gloss corpus with a synonym table."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_corpus(workdir: str, vocab_size: int, max_lines: int = 0) -> str:
    """Prepare (once) the WordNet-gloss corpus and its synonym table; returns data-bin."""
    data_bin = os.path.join(workdir, "data-bin")
    if not os.path.isfile(os.path.join(data_bin, "dict.txt")):
        cmd = [
            sys.executable,
            os.path.join(REPO, "scripts", "prepare_corpus.py"),
            "--wordnet-glosses",
            "--output-dir",
            workdir,
            "--vocab-size",
            str(vocab_size),
        ]
        if max_lines:
            cmd += ["--max-lines", str(max_lines)]
        cmd += ["--keep-intermediates"]  # squad_throughput.py reads raw/train.txt
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    table = os.path.join(data_bin, "synonyms.npz")
    if not os.path.isfile(table):
        subprocess.run(
            [
                sys.executable,
                os.path.join(REPO, "scripts", "build_synonym_table.py"),
                "--dict",
                os.path.join(data_bin, "dict.txt"),
                "--tokenizer",
                "sentencepiece",
                "--spm-model",
                os.path.join(workdir, "spm.model"),
                "--output",
                table,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return data_bin


def alternating_step_times(steps, batches, rounds, warmup):
    """Time ``steps`` (name -> callable(batch)) in alternation: every round runs each step once
    on the same batch, in an order rotated by one each round, so drift in machine speed hits all
    of them alike. Returns name -> list of seconds (warm-up rounds dropped)."""
    import time

    names = list(steps)
    times = {n: [] for n in names}
    for r in range(warmup + rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        batch = batches[r % len(batches)]
        for n in order:
            t0 = time.perf_counter()
            steps[n](batch)
            if r >= warmup:
                times[n].append(time.perf_counter() - t0)
    return times


def make_train_step(model, criterion, optimizer):
    """A fairseq training step for one batch: forward through the criterion, backward, update."""

    def step(sample):
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = criterion(model, sample)
        loss.backward()
        optimizer.step()

    return step


def make_batches(n, bsz, seq, vocab, pad, bos, eos, mask_idx, nspecial, seed=0, device="cpu"):
    """Pre-masked batches in fairseq's layout: src_tokens (B x T), target (pad where unmasked),
    plus the unmasked ``original``: 15% of the tokens selected, 85% of those become <mask>."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        tok = rng.integers(nspecial, vocab - 1, size=(bsz, seq))
        tok[:, 0], tok[:, -1] = bos, eos
        sel = rng.random((bsz, seq)) < 0.15
        sel[:, 0] = sel[:, -1] = False
        src = np.where(sel & (rng.random((bsz, seq)) < 0.85), mask_idx, tok)
        tgt = np.where(sel, tok, pad)
        out.append(
            {
                "net_input": {
                    "src_tokens": torch.from_numpy(src).long().to(device),
                    "src_lengths": torch.full((bsz,), seq, device=device),
                },
                "target": torch.from_numpy(tgt).long().to(device),
                "ntokens": bsz * seq,
                "nsentences": bsz,
                "original": torch.from_numpy(tok).long().to(device),
            }
        )
    return out


def hf_electra_loss(gen, disc, sample, pad):
    """The HuggingFace transformers ELECTRA objective on one pre-masked batch (the reference the
    plugin is timed against): generator MLM + 50 x the discriminator's BCE on the corrupted input,
    replacements sampled from the generator softmax (Gumbel-max) without gradient."""
    import torch
    import torch.nn.functional as F

    src, tgt, orig = sample["net_input"]["src_tokens"], sample["target"], sample["original"]
    attn = src.ne(pad).long()
    g = gen(input_ids=src, attention_mask=attn, labels=torch.where(tgt.ne(pad), tgt, -100))
    masked = tgt.ne(pad)
    with torch.no_grad():
        logits = g.logits[masked].float()
        u = torch.rand_like(logits).clamp_(1e-9, 1 - 1e-9)
        sampled = (logits - torch.log(-torch.log(u))).argmax(-1)
    corrupted = src.clone()
    corrupted[masked] = sampled
    d = disc(input_ids=corrupted, attention_mask=attn)
    rtd = F.binary_cross_entropy_with_logits(
        d.logits.float(), corrupted.ne(orig).float(), weight=attn.float()
    )
    return g.loss + 50.0 * rtd


def add_timing_args(p, rounds: int, warmup: int, batches: int, batch_size: int = 32) -> None:
    """The flags every alternating CPU benchmark takes."""
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--batches", type=int, default=batches, help="distinct batches cycled through")
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")


def parse_timing_args(p):
    """Parse, and apply --threads before anything is timed."""
    import torch

    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    return args
