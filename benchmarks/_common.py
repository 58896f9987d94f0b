"""Shared set-up for the benchmarks: a binarized WordNet-gloss corpus with a synonym table."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def ensure_corpus(workdir: str, vocab_size: int, max_lines: int = 0) -> str:
    """Prepare (once) the WordNet-gloss corpus and its synonym table; returns data-bin."""
    data_bin = os.path.join(workdir, "data-bin")
    if not os.path.isfile(os.path.join(data_bin, "dict.txt")):
        cmd = [sys.executable, os.path.join(REPO, "scripts", "prepare_corpus.py"), "--wordnet-glosses",
               "--output-dir", workdir, "--vocab-size", str(vocab_size)]
        if max_lines:
            cmd += ["--max-lines", str(max_lines)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    table = os.path.join(data_bin, "synonyms.npz")
    if not os.path.isfile(table):
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "build_synonym_table.py"), "--dict",
                        os.path.join(data_bin, "dict.txt"), "--tokenizer", "sentencepiece", "--spm-model",
                        os.path.join(workdir, "spm.model"), "--output", table], check=True, stdout=subprocess.DEVNULL)
    return data_bin


def alternating_step_times(steps, batches, rounds, warmup):
    """Time ``steps`` (name -> callable(batch)) in alternation: every round runs each step once
    on the same batch, in an order rotated by one each round, so drift in machine speed hits all
    of them alike. Returns name -> list of seconds (warm-up rounds dropped)."""
    import time

    names = list(steps)
    times = {n: [] for n in names}
    for r in range(warmup + rounds):
        order = names[r % len(names):] + names[: r % len(names)]
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
