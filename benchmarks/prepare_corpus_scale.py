"""The corpus pipeline at corpus scale: wall time, CPU time and peak memory per stage of
``prepare_corpus`` (sentencepiece trained on the text) on a generated ~200 MB English text.

    python benchmarks/prepare_corpus_scale.py [--workdir DIR] [--size-mb 200] [--workers N]

The text is WordNet's glosses and examples recombined (seeded, so every run builds the same
file): each line joins two to four glosses as sentences, so lines are distinct and the
vocabulary and its frequencies are those of English definitions. It is written once into
``--workdir`` and reused. Memory per stage: ``resource.getrusage`` (the peak RSS of this process
and of its largest child so far, summed) and the peak PSS of the whole process tree sampled
every 0.2 s (``/proc/PID/smaps_rollup``; a forked worker's pages shared with this process
count once). The load average before and after is printed: the machine may be shared.
"""

import argparse
import json
import logging
import os
import random
import resource
import tempfile
import threading
import time


def make_text(path: str, size_mb: int, seed: int = 1) -> None:
    from truneg_fairseq.data.corpus_steps import wordnet_gloss_lines
    from truneg_fairseq.outputs import atomic_open

    glosses = [g.rstrip(". ") for g in wordnet_gloss_lines()]
    rng = random.Random(seed)
    target, written = size_mb << 20, 0
    with atomic_open(path, "w", encoding="utf-8") as f:
        while written < target:
            parts = rng.choices(glosses, k=rng.choice((2, 3, 3, 4)))
            line = ". ".join(p[:1].upper() + p[1:] for p in parts) + ".\n"
            f.write(line)
            written += len(line.encode("utf-8"))


def _tree_pss_mb() -> float:
    from truneg_fairseq.pipelines.children import descendants

    total = 0
    for pid in [os.getpid(), *descendants()]:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def _usage():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    return cpu, s.ru_maxrss / 1024, c.ru_maxrss / 1024


class Meter:
    """on_stage hook: per stage wall, CPU, getrusage peaks and the sampled tree PSS peak."""

    def __init__(self):
        self.rows, self.peak, self.t0, self.cpu0 = [], 0.0, 0.0, 0.0
        self._stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self):
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, _tree_pss_mb())

    def __call__(self, name, when):
        if when == "start":
            self.t0, self.cpu0, self.peak = time.time(), _usage()[0], _tree_pss_mb()
            return
        cpu, self_rss, child_rss = _usage()
        self.rows.append(
            {
                "stage": name,
                "wall_s": round(time.time() - self.t0, 1),
                "cpu_s": round(cpu - self.cpu0, 1),
                "rusage_self_mb": round(self_rss),
                "rusage_children_mb": round(child_rss),
                "tree_pss_peak_mb": round(max(self.peak, _tree_pss_mb())),
            }
        )

    def stop(self):
        self._stop.set()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "corpus-scale"))
    p.add_argument("--size-mb", type=int, default=200)
    p.add_argument("--workers", type=int, default=None, help="default: every core")
    p.add_argument("--json", help="also write the numbers here")
    p.add_argument("--step", choices=["generate", "measure"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    text = os.path.join(args.workdir, f"english-{args.size_mb}mb.txt")
    if args.step is None:  # each step in a new process: the measured one starts clean
        import subprocess
        import sys

        argv = [
            sys.executable,
            os.path.abspath(__file__),
            *(sys.argv[1:] if argv is None else argv),
        ]
        if not os.path.isfile(text):
            subprocess.run([*argv, "--step", "generate"], check=True)
        return subprocess.run([*argv, "--step", "measure"]).returncode

    from truneg_fairseq.cli.common import setup_logging
    from truneg_fairseq.pipelines.corpus import CorpusConfig, available_cores, prepare_corpus

    log = setup_logging("prepare_corpus_scale")
    os.makedirs(args.workdir, exist_ok=True)
    if args.step == "generate":
        t0 = time.time()
        make_text(text, args.size_mb)
        log.info(f"generated {text} in {time.time() - t0:.0f} s")
        return 0
    load_before = os.getloadavg()
    meter = Meter()
    cfg = CorpusConfig(
        output_dir=os.path.join(args.workdir, "out"), inputs=[text], workers=args.workers
    )
    t0 = time.time()
    prepare_corpus(cfg, logging.getLogger("truneg_fairseq.prepare_corpus"), on_stage=meter)
    wall = time.time() - t0
    meter.stop()
    cpu, self_rss, child_rss = _usage()
    result = {
        "text_mb": round(os.path.getsize(text) / 2**20, 1),
        "workers": cfg.workers or available_cores(),
        "total_wall_s": round(wall, 1),
        "peak_rusage_self_plus_children_mb": round(self_rss + child_rss),
        "peak_tree_pss_mb": max(r["tree_pss_peak_mb"] for r in meter.rows),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpu": _cpu_name(),
        "stages": meter.rows,
    }
    print(f"\n{result['text_mb']} MB of text, {result['workers']} workers, {_cpu_name()}")
    print(f"load average before {load_before}, after {result['loadavg_after']}")
    print("| stage | wall s | CPU s | getrusage self / children MB | tree PSS peak MB |")
    print("|---|---|---|---|---|")
    for r in meter.rows:
        print(
            f"| {r['stage']} | {r['wall_s']} | {r['cpu_s']} | {r['rusage_self_mb']} / "
            f"{r['rusage_children_mb']} | {r['tree_pss_peak_mb']} |"
        )
    print(
        f"| total | {result['total_wall_s']} | {round(cpu, 1)} | "
        f"{result['peak_rusage_self_plus_children_mb']} (sum) | {result['peak_tree_pss_mb']} |"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            name = next(x.split(":", 1)[1].strip() for x in f if x.startswith("model name"))
    except (OSError, StopIteration):
        name = "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


if __name__ == "__main__":
    raise SystemExit(main())
