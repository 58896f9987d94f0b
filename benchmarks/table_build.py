#!/usr/bin/env python
"""Time to build the WordNet synonym table of a 32k-entry sentencepiece dictionary, and its size.

Targets: under 60 s, file under 10 MB. Uses (or prepares once) benchmarks/.cache/wn32k, a
32k-piece sentencepiece model trained on the WordNet-gloss corpus.
"""

import argparse
import os
import platform
import subprocess
import sys
import time

from _common import REPO, ensure_corpus


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workdir", default=os.path.join(REPO, "benchmarks", ".cache", "wn32k"))
    p.add_argument("--vocab-size", type=int, default=32000)
    args = p.parse_args()
    data_bin = ensure_corpus(args.workdir, args.vocab_size)
    out = os.path.join(args.workdir, "bench_table.npz")
    cmd = [
        sys.executable,
        os.path.join(REPO, "scripts", "build_synonym_table.py"),
        "--dict",
        os.path.join(data_bin, "dict.txt"),
        "--tokenizer",
        "sentencepiece",
        "--spm-model",
        os.path.join(args.workdir, "spm.model"),
        "--output",
        out,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    with open(os.path.join(data_bin, "dict.txt")) as f:
        n = sum(1 for _ in f) + 4
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores")
    for line in proc.stdout.splitlines():
        if "coverage" in line or "synonym pairs" in line or "wrote" in line:
            print("  " + line.split(" | ")[-1])
    size = os.path.getsize(out) / 1e6
    print(
        f"dictionary {n} entries: build {wall:.1f} s wall (CLI incl. start-up; target < 60 s), "
        f"file {size:.2f} MB (target < 10 MB)"
    )


if __name__ == "__main__":
    main()
