"""Counter-false-negative pre-training measured over training (the paper's Table 2 and Figure 3).

The pipeline that ``scripts/demo.py`` and ``examples/study/run_study.py`` share:

1. corpus   WordNet as a dictionary (or the user's text), lower-cased, punctuation split off,
            one line per entry ("chief , main , primary , principal : most important element")
            and per example sentence; a word-level dictionary of the most frequent words
            (``prepare_corpus.py --tokenizer whitespace --vocab-size N``): every content word is
            one entry, so every mispredicted masked word can be a synonym prediction. Lines with
            a word outside the dictionary are left out (counted in the log): the model never
            learns ``<unk>`` as an answer, which would otherwise be its most frequent prediction;
2. table    the WordNet synonym table of that dictionary (what ``build_synonym_table.py`` builds,
            built in this process: WordNet is loaded here already for the corpus);
3. stage 1  one plain pre-training per model family (``masked_lm`` for RoBERTa, ``electra``
            for ELECTRA) from scratch: the shared start, as the paper continues its base models;
4. stage 2  each criterion continued from that same checkpoint for the same number of updates
            (``--restore-file ... --reset-optimizer --reset-dataloader --reset-meters
            --reset-lr-scheduler``), the learning rate going on from where stage 1 left it and
            decaying to 0, checkpoints at ``--save-interval-updates``;
5. scoring  every checkpoint on the same masked valid blocks
            (:class:`truneg_fairseq.pipelines.scorer.FixedMaskScorer`: the criterions' own
            accounting, :mod:`truneg_fairseq.evaluation.false_negatives`), results as typed
            records (:class:`Scores`).

Independent trainings (the families' stage 1s, then every continuation) and the scorings run
side by side, ``Setting.jobs`` at a time (default: one per usable CPU core, one thread each; one
at a time on a GPU). Every training goes through the real ``fairseq-train`` command line (``python -m
fairseq_cli.train --user-dir truneg_fairseq``); the exact commands are written to
``commands.sh`` in the results folder (the synonym table and the word vectors, built in this
process, as the script commands that build the same files). Steps whose outputs exist are reused.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.io_utils import atomic_open

if TYPE_CHECKING:
    from truneg_fairseq.evaluation.false_negatives import Case, Counts, Report

logger = logging.getLogger(__name__)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
USER_DIR = os.path.join(REPO, "truneg_fairseq")

# lower-cased words (with an inner apostrophe), numbers, and every other character on its own
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]")


def word_tokenize(line: str) -> str:
    """Lower-case ``line`` and split punctuation off the words ("Main, primary." -> "main ,
    primary .")."""
    return " ".join(_WORD.findall(line.lower()))


# ---------------------------------------------------------------------------------------------
# the setting
# ---------------------------------------------------------------------------------------------
@dataclass
class Family:
    """One model family: how it is built, its stage-1 criterion and the criterions continued."""

    name: str                       # "roberta" or "electra"
    task: str                       # fairseq task
    arch: List[str]                 # --arch and size flags
    baseline: str                   # the stage-1 criterion (and the continued baseline)
    criteria: List[str]             # criterions continued from stage 1 (the baseline included)


@dataclass
class Setting:
    vocab_size: int = 16000         # words kept
    valid_fraction: float = 0.05
    corpus: str = "entries"         # WordNet: "entries" (headwords: definition, and examples) or "glosses"
    in_vocab_only: bool = True      # leave out lines with a word outside the vocab_size most frequent
    tokens_per_sample: int = 128    # longer lines are left out
    break_mode: str = "eos"         # one line per sample: every context word is of the same sentence
    batch_size: int = 128           # lines per update
    embed_init: bool = True         # RoBERTa's stage 1 starts its embeddings from count-based word vectors
    lr: float = 2e-3                # peak; one polynomial schedule over stage 1 + stage 2
    warmup: int = 100
    stage1_updates: int = 800
    stage2_updates: int = 200
    points: int = 4                 # checkpoints per continuation (evenly spaced)
    seed: int = 1
    eval_max_blocks: int = 0        # valid blocks scored (0: all)
    eval_passes: int = 4            # independent mask draws over them (more masked words, less noise)
    families: List[Family] = field(default_factory=list)
    extra_train_args: List[str] = field(default_factory=list)
    max_lines: int = 0              # corpus lines kept (0: all); for tiny test runs
    cpu: bool = True                # --cpu (False: fairseq-train uses the GPU)
    jobs: int = 0                   # trainings / scorings side by side (0: one per CPU core; 1 on a GPU)

    def __post_init__(self):
        if self.points < 1 or self.stage2_updates < self.points:
            raise ValueError(f"stage 2 needs at least one update per scored point: {self.stage2_updates} updates, "
                             f"{self.points} points")
        # checkpoints at exact shares of stage 2 (20/40/.../100% for 5 points)
        self.stage2_updates -= self.stage2_updates % self.points

    def save_interval(self) -> int:
        return self.stage2_updates // self.points


# ---------------------------------------------------------------------------------------------
# running commands
# ---------------------------------------------------------------------------------------------
class Runner:
    """Runs commands with their full output in log files, echoes fairseq's progress lines and
    records every command (``commands.sh``). :meth:`run_many` runs independent commands side
    by side, each with its share of the CPU threads."""

    ECHO = ("| train_inner |", "| valid |", "replaced (by", "coverage", "synonym pairs", "vectors from", "lines:")

    def __init__(self, work: str, log: logging.Logger, echo: bool = True):
        self.work = work
        self.log = log
        self.echo = echo
        self.commands: List[str] = []
        self.seconds: Dict[str, float] = {}
        self._procs: set = set()
        self._stopped = False

    def __call__(self, cmd: Sequence[str], name: str, env: Optional[dict] = None) -> float:
        self.commands.append(" ".join(shlex.quote(c) for c in cmd))
        return self._run(cmd, name, env)

    def here(self, step: Callable[[], None], cmd: Sequence[str], name: str) -> float:
        """Run ``step`` in this process (the library call behind the script ``cmd``: a new
        interpreter would spend seconds importing torch and fairseq, and WordNet is loaded here
        already); ``cmd`` is recorded, so ``commands.sh`` still rebuilds the same file."""
        self.commands.append(" ".join(shlex.quote(c) for c in cmd))
        t0 = time.time()
        step()
        self.seconds[name] = time.time() - t0
        return self.seconds[name]

    def run_many(self, jobs: Sequence[Tuple[Sequence[str], str]], parallel: int = 1) -> None:
        """Runs the (command, name) pairs, ``parallel`` at a time, in the given order of starting;
        with ``parallel`` > 1 each gets ``cpus // parallel`` threads (OMP_NUM_THREADS). The first
        failure stops the others and names its log."""
        for cmd, _ in jobs:
            self.commands.append(" ".join(shlex.quote(c) for c in cmd))
        if parallel <= 1 or len(jobs) <= 1:
            for cmd, name in jobs:
                self._run(cmd, name)
            return
        from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

        env = thread_env(parallel)
        self.log.info(f"running {len(jobs)} commands, {parallel} at a time, {env['OMP_NUM_THREADS']} thread(s) each: "
                      + ", ".join(name for _, name in jobs))
        with ThreadPoolExecutor(parallel) as pool:
            futures = [pool.submit(self._run, cmd, name, env) for cmd, name in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                self._stopped = True
                for f in futures:
                    f.cancel()
                for proc in list(self._procs):
                    proc.terminate()
                raise failed[0].exception()

    def _run(self, cmd: Sequence[str], name: str, env: Optional[dict] = None) -> float:
        if self._stopped:
            return 0.0
        log_path = os.path.join(self.work, "logs", f"{name}.log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        t0 = time.time()
        with open(log_path, "w") as f:
            proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
            self._procs.add(proc)
            try:
                for line in proc.stdout:
                    f.write(line)
                    if self.echo and any(key in line for key in self.ECHO):
                        self.log.info(f"[{name}] " + line.split("| INFO | ", 1)[-1].rstrip())
                rc = proc.wait()
            finally:
                self._procs.discard(proc)
        if rc != 0:
            raise SystemExit(f"error: {name} failed (exit {rc}); the command and its output are in {log_path}")
        self.seconds[name] = time.time() - t0
        return self.seconds[name]

    def write_commands(self, path: str) -> None:
        with atomic_open(path, "w") as f:
            f.write("#!/bin/bash\n# the commands of this run, in order (steps reused from an earlier run included; "
                    "runs listed one after another may have run side by side)\n")
            f.write("set -e\n" + "\n".join(self.commands) + "\n")


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def thread_env(parallel: int) -> Dict[str, str]:
    """Environment of one of ``parallel`` side-by-side CPU jobs: its share of the threads. At
    the demo's sizes one training on one thread runs as fast as on two (the matrices are too
    small to split), so two side by side do nearly twice the updates."""
    n = str(max(1, usable_cpus() // max(parallel, 1)))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}


def default_jobs(setting: "Setting") -> int:
    """Side-by-side jobs: one per usable CPU core for CPU runs, one on a GPU."""
    return usable_cpus() if setting.cpu else 1


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------
def prepare_data(work: str, setting: Setting, run: Runner, inputs: Optional[Sequence[str]] = None) -> Tuple[str, str]:
    """Word-level corpus, data-bin and synonym table under ``work``; returns (data_bin, table)."""
    data_bin = os.path.join(work, "data-bin")
    table = os.path.join(data_bin, "synonyms.npz")
    text = os.path.join(work, "corpus.txt")
    if not os.path.isfile(os.path.join(data_bin, "dict.txt")):
        if not os.path.isfile(text):
            from truneg_fairseq.data.corpus import read_text_lines, wordnet_gloss_lines

            raw = (l for p in inputs for l in read_text_lines(p)) if inputs else \
                wordnet_gloss_lines(headwords=setting.corpus == "entries")
            lines = corpus_lines(raw, setting, run.log)
            with atomic_open(text, "w", encoding="utf-8") as f:
                f.writelines(l + "\n" for l in lines)
            run.log.info(f"{text}: {len(lines)} lines, lower-cased, punctuation split off")
        run([sys.executable, os.path.join(REPO, "scripts", "prepare_corpus.py"), "--input", text, "--output-dir", work,
             "--tokenizer", "whitespace", "--vocab-size", str(setting.vocab_size),
             "--valid-fraction", str(setting.valid_fraction), "--seed", str(setting.seed)], "prepare_corpus")
    else:
        run.commands.append(f"# reused {data_bin} (scripts/prepare_corpus.py --tokenizer whitespace)")
    if not os.path.isfile(table):
        run.here(lambda: build_synonym_table(data_bin, table, run.log),
                 [sys.executable, os.path.join(REPO, "scripts", "build_synonym_table.py"), "--dict",
                  os.path.join(data_bin, "dict.txt"), "--tokenizer", "whitespace", "--output", table], "synonym_table")
    else:
        run.commands.append(f"# reused {table} (scripts/build_synonym_table.py --tokenizer whitespace)")
    return data_bin, table


def build_synonym_table(data_bin: str, table: str, log: logging.Logger) -> None:
    """The WordNet synonym table of the word-level dictionary (what ``scripts/build_synonym_table.py
    --tokenizer whitespace`` writes)."""
    from truneg_fairseq.lexicon import build_table, vocab_view

    view = vocab_view(os.path.join(data_bin, "dict.txt"), "whitespace")
    built, report = build_table(view, source="wordnet")
    built.save(table)
    log.info(f"{table}: {report.num_pairs} synonym pairs; {report.describe(len(view.symbols))}")


def corpus_lines(raw, setting: Setting, log: logging.Logger) -> List[str]:
    """Tokenized lines (:func:`word_tokenize`) of ``raw`` for the setting: at most
    ``max_lines``; lines longer than a sample left out; with ``in_vocab_only`` also the lines
    holding a word outside the ``vocab_size`` most frequent ones (each count logged)."""
    from collections import Counter

    lines, too_long = [], 0
    for line in raw:
        words = word_tokenize(line)
        if not words:
            continue
        if len(words.split()) > setting.tokens_per_sample - 2:  # <s> and </s> take two positions
            too_long += 1
            continue
        lines.append(words)
        if setting.max_lines and len(lines) >= setting.max_lines:
            break
    if too_long:
        log.info(f"left out {too_long} lines longer than {setting.tokens_per_sample - 2} words")
    if setting.in_vocab_only:
        counts = Counter(w for l in lines for w in l.split())
        keep = {w for w, _ in counts.most_common(setting.vocab_size)}
        kept = [l for l in lines if all(w in keep for w in l.split())]
        log.info(f"kept {len(kept)} of {len(lines)} lines: {len(lines) - len(kept)} hold a word outside the "
                 f"{len(keep)} most frequent (the dictionary), so no <unk> is left to predict")
        lines = kept
    return lines


def unknown_rates(data_bin: str) -> Dict[str, float]:
    """% of the tokens of each split that are <unk> (fairseq-preprocess's preprocess.log)."""
    out = {}
    path = os.path.join(data_bin, "preprocess.log")
    if os.path.isfile(path):
        for line in open(path, encoding="utf-8"):
            m = re.search(r"/(\w+)\.txt: .*?([0-9.]+)% replaced", line)
            if m:
                out[m.group(1)] = float(m.group(2))
    return out


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------
def train_command(setting: Setting, family: Family, criterion: str, data_bin: str, table: str, save_dir: str,
                  stage: int) -> List[str]:
    """The fairseq-train command line of a stage-1 run (from scratch) or a stage-2 continuation."""
    s = setting
    total = s.stage1_updates + s.stage2_updates
    cmd = [
        sys.executable, "-m", "fairseq_cli.train", data_bin, "--user-dir", USER_DIR,
        "--task", family.task, "--criterion", criterion, *family.arch,
        "--tokens-per-sample", str(s.tokens_per_sample), "--sample-break-mode", s.break_mode,
        "--num-workers", "0", "--batch-size", str(s.batch_size), "--seed", str(s.seed),
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
        "--clip-norm", "1.0", "--lr-scheduler", "polynomial_decay",
        "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "50",
        "--tensorboard-logdir", os.path.join(os.path.dirname(os.path.dirname(save_dir)), "tb", os.path.basename(save_dir)),
        "--disable-validation",
    ]
    if stage == 1:
        # one schedule over both stages: warm-up, then linear decay that stage 2 finishes
        cmd += ["--lr", str(s.lr), "--warmup-updates", str(s.warmup), "--total-num-update", str(total),
                "--max-update", str(s.stage1_updates), "--save-interval-updates", str(s.stage1_updates)]
        init = embed_init_flag(family)
        if s.embed_init and init is not None:
            cmd += [init[0], vectors_path(data_bin, init[1])]
    else:
        lr = s.lr * (total - s.stage1_updates) / (total - s.warmup)
        cmd += ["--lr", f"{lr:.6g}", "--warmup-updates", "0", "--total-num-update", str(s.stage2_updates),
                "--max-update", str(s.stage2_updates), "--save-interval-updates", str(s.save_interval()),
                "--keep-interval-updates", "-1",
                "--restore-file", os.path.join(os.path.dirname(save_dir), f"{family.name}_stage1", "checkpoint_last.pt"),
                "--reset-optimizer", "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler"]
    if s.cpu:
        cmd += ["--cpu"]
    if criterion not in ("masked_lm", "electra"):
        cmd += ["--synonym-table", table]
    return cmd + list(s.extra_train_args)


def embed_init_flag(family: Family) -> Optional[Tuple[str, int]]:
    """(flag, token-embedding size) of a family whose model starts from word vectors
    (``--truneg-embed-init``: the plugin's RoBERTa; ``--electra-embed-init``: ELECTRA), else None."""
    a = family.arch
    arch = a[a.index("--arch") + 1] if "--arch" in a else ""
    if arch.startswith("truneg_roberta"):
        flag, size_flag, default = "--truneg-embed-init", "--encoder-embed-dim", 768
    elif arch.startswith("electra"):
        flag, size_flag = "--electra-embed-init", "--electra-embed-dim"
        default = {"electra_small": 128, "electra_large": 1024}.get(arch, 768)
    else:
        return None
    return flag, int(a[a.index(size_flag) + 1]) if size_flag in a else default


def vectors_path(data_bin: str, dim: int) -> str:
    return os.path.join(data_bin, f"word_vectors.{dim}.npy")


def write_word_vectors(setting: Setting, work: str, data_bin: str, run: Runner) -> None:
    """Count-based vectors of the training text for every family that starts from them."""
    if not setting.embed_init:
        return
    for dim in sorted({init[1] for init in map(embed_init_flag, setting.families) if init}):
        out = vectors_path(data_bin, dim)
        if os.path.isfile(out):
            run.commands.append(f"# reused {out} (scripts/word_vectors.py)")
            continue
        from truneg_fairseq.data.word_vectors import write_vectors

        dict_txt, text = os.path.join(data_bin, "dict.txt"), os.path.join(work, "raw", "train.txt")
        run.here(lambda: write_vectors(dict_txt, text, out, dim, 5),
                 [sys.executable, os.path.join(REPO, "scripts", "word_vectors.py"), "--dict", dict_txt, "--text", text,
                  "--dim", str(dim), "--output", out], f"word_vectors_{dim}")


def run_id(family: Family, criterion: str) -> str:
    return f"{family.name}_{criterion}"


def train_all(setting: Setting, work: str, data_bin: str, table: str, run: Runner) -> Dict[str, float]:
    """Stage 1 of every family (side by side), then every continuation (side by side, slowest
    first); returns the training seconds per run."""
    from truneg_fairseq.evaluation.false_negatives import interval_checkpoints

    ck = os.path.join(work, "checkpoints")
    jobs = setting.jobs or default_jobs(setting)
    write_word_vectors(setting, work, data_bin, run)
    stage1 = []
    for fam in setting.families:
        save = os.path.join(ck, f"{fam.name}_stage1")
        if not os.path.isfile(os.path.join(save, "checkpoint_last.pt")):
            run.log.info(f"stage 1: {fam.name} with --criterion {fam.baseline}, {setting.stage1_updates} updates")
            stage1.append((train_command(setting, fam, fam.baseline, data_bin, table, save, 1), f"train_{fam.name}_stage1"))
        else:
            run.commands.append(f"# reused {save}/checkpoint_last.pt")
    run.run_many(stage1, jobs)
    stage2 = []
    for fam in setting.families:
        for crit in fam.criteria:
            save = os.path.join(ck, run_id(fam, crit))
            if os.path.isdir(save) and setting.stage2_updates in interval_checkpoints(save):
                run.commands.append(f"# reused {save}")
                continue
            run.log.info(f"stage 2: {fam.name} continued with --criterion {crit}, {setting.stage2_updates} updates")
            stage2.append((train_command(setting, fam, crit, data_bin, table, save, 2), f"train_{run_id(fam, crit)}"))
    # sentence-KL runs two encoder passes per step: start it first so the others fill in around it
    stage2.sort(key=lambda job: "mlm_sent_kl" not in job[1])
    run.run_many(stage2, jobs)
    return dict(run.seconds)


# ---------------------------------------------------------------------------------------------
# scoring and tables
# ---------------------------------------------------------------------------------------------
_SCORER = None  # the FixedMaskScorer of a scoring worker process


def _start_scorer(kwargs: dict, threads: int) -> None:
    import torch

    from truneg_fairseq.pipelines.scorer import FixedMaskScorer

    global _SCORER
    torch.set_num_threads(threads)
    # a spawned worker: warnings and errors in fairseq's format; the parent logs each score
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=logging.WARNING, stream=sys.stderr)
    _SCORER = FixedMaskScorer(**kwargs)


def _score_task(task: Tuple[str, int, str, int]):
    return _SCORER.score_checkpoint(task[2], task[3])


@dataclass
class Scores:
    """What :func:`score_all` gives: the reported values of every scored checkpoint, ``reports[run][updates]``
    (update 0 of a continuation: the shared stage-1 checkpoint), the counts they were derived
    from (``counts["run@updates"]``, ``counts["<family>_stage1"]``), the cases and the size of
    the masked valid set."""

    reports: Dict[str, Dict[int, "Report"]]
    counts: Dict[str, "Counts"]
    cases: List["Case"]
    valid_sequences: int
    valid_masked: int

    def meta(self) -> dict:
        return {"valid_blocks": self.valid_sequences, "valid_masked": self.valid_masked}


def score_all(setting: Setting, work: str, data_bin: str, table: str, num_cases: int = 5,
              log: Optional[logging.Logger] = None) -> Scores:
    """Score the stage-1 checkpoint (update 0 of every continuation) and every continuation
    checkpoint, and pick the cases (from the last checkpoints, distinct (gold, prediction)
    pairs, in the order of the runs). On the CPU the checkpoints are scored ``jobs`` at a time,
    each worker with the same fixed masks."""
    import torch

    from truneg_fairseq.evaluation.false_negatives import derive, interval_checkpoints

    device = "cpu" if setting.cpu or not torch.cuda.is_available() else "cuda"
    kwargs = dict(data_bin=data_bin, synonym_table=table, tokens_per_sample=setting.tokens_per_sample,
                  break_mode=setting.break_mode, seed=setting.seed, max_blocks=setting.eval_max_blocks,
                  passes=setting.eval_passes, device=device)
    ck = os.path.join(work, "checkpoints")
    tasks: List[Tuple[str, int, str, int]] = []  # (run, updates, checkpoint, cases wanted)
    for fam in setting.families:
        tasks.append((f"{fam.name}_stage1", 0, os.path.join(ck, f"{fam.name}_stage1", "checkpoint_last.pt"), 0))
        for crit in fam.criteria:
            saved = interval_checkpoints(os.path.join(ck, run_id(fam, crit)))
            tasks += [(run_id(fam, crit), upd, path, num_cases if upd == max(saved) else 0) for upd, path in saved.items()]
    jobs = min(setting.jobs or default_jobs(setting), len(tasks)) if device == "cpu" else 1
    pool, scored = _score_in_workers(tasks, kwargs, jobs, log)
    family_of = {run_id(fam, crit): fam.name for fam in setting.families for crit in fam.criteria}
    reports: Dict[str, Dict[int, "Report"]] = {}
    counts_of: Dict[str, "Counts"] = {}
    cases, seen = [], set()
    starts = {}
    try:
        for (rid, upd, _, _), got in zip(tasks, scored):
            if rid.endswith("_stage1"):
                starts[rid[: -len("_stage1")]] = got.counts
                counts_of[rid] = got.counts
                continue
            reports.setdefault(rid, {0: derive(starts[family_of[rid]])})[upd] = got.report
            counts_of[f"{rid}@{upd}"] = got.counts
            for c in got.cases:
                if len(cases) < num_cases and (c.gold, c.prediction) not in seen:
                    seen.add((c.gold, c.prediction))
                    cases.append(c)
            if log:
                r = reports[rid][upd]
                log.info(f"scored {rid} update {upd}: loss {r.mlm_loss:.3f} bits, acc {r.mlm_acc:.2f}%, "
                         f"synonym-aware {r.syn_acc:.2f}%, pred-level {r.pred_corr_ratio:.3f}%, "
                         f"iter-level {r.iter_corr_ratio:.2f}% ({r.iter_corr_ratio_512:.2f}% over 512-token units), "
                         f"content predictions {_fmt(r.content_pred, '{:.1f}')}%")
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    first = next(iter(counts_of.values()))
    return Scores(reports, counts_of, cases, first.masked_sequences, first.masked)


def _fmt(value, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _score_in_workers(tasks, kwargs: dict, jobs: int, log: Optional[logging.Logger]):
    """(pool or None, an iterator of (counts, cases) in the order of ``tasks``): ``jobs`` worker
    processes, each with its own :class:`FixedMaskScorer` (the same fixed masks), or this
    process when ``jobs`` is 1."""
    if jobs <= 1:
        from truneg_fairseq.pipelines.scorer import FixedMaskScorer

        scorer = FixedMaskScorer(**kwargs)
        return None, (scorer.score_checkpoint(t[2], t[3]) for t in tasks)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if log:
        log.info(f"scoring {len(tasks)} checkpoints, {jobs} at a time")
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_scorer,
                               initargs=(kwargs, max(1, usable_cpus() // jobs)))
    return pool, pool.map(_score_task, tasks)


COLUMNS = [("mlm_loss", "valid loss (bits)", "{:.3f}"), ("mlm_acc", "MLM acc %", "{:.2f}"),
           ("syn_acc", "syn-aware acc %", "{:.2f}"), ("pred_corr_ratio", "pred-level %", "{:.3f}"),
           ("iter_corr_ratio", "iter-level %", "{:.2f}"), ("iter_corr_ratio_512", "iter-level % (512)", "{:.2f}"),
           ("content_pred", "content preds %", "{:.1f}")]


def progress_table(results: Dict[str, Dict[int, "Report"]]) -> List[List[str]]:
    """Rows (run, update, the :data:`COLUMNS`) for every scored checkpoint, header first."""
    rows = [["run", "update"] + [c[1] for c in COLUMNS]]
    for rid, by_upd in results.items():
        for upd, r in by_upd.items():
            rows.append([rid, str(upd)] + [_fmt(getattr(r, k), fmt) for k, _, fmt in COLUMNS])
    return rows


def table2(results: Dict[str, Dict[int, "Report"]], key: str, corner: str = "run") -> List[List[str]]:
    """The paper's Table 2 layout: one row per run, one column per share of stage 2 done."""
    upds = sorted({u for r in results.values() for u in r if u > 0})
    total = max(upds) if upds else 1
    rows = [[corner] + [f"{round(100 * u / total)}%" for u in upds]]
    for rid, by_upd in results.items():
        rows.append([rid] + [_fmt(getattr(by_upd[u], key), "{:.3f}") if u in by_upd else "-" for u in upds])
    return rows


def format_rows(rows: List[List[str]]) -> str:
    """Aligned text with a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_rows(rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(out)


def write_results(out_dir: str, results, cases, meta: dict) -> None:
    """results.json, progress.tsv, table2_{pred,iter}_level.tsv, table2_iter_level_512.tsv and cases.txt in ``out_dir`` (atomically)."""
    os.makedirs(out_dir, exist_ok=True)
    with atomic_open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": {k: {str(u): v.as_dict() for u, v in r.items()} for k, r in results.items()},
                   "cases": [asdict(c) for c in cases]}, f, indent=1)
    for name, rows in (("progress.tsv", progress_table(results)), ("table2_pred_level.tsv", table2(results, "pred_corr_ratio")),
                       ("table2_iter_level.tsv", table2(results, "iter_corr_ratio")),
                       ("table2_iter_level_512.tsv", table2(results, "iter_corr_ratio_512"))):
        with atomic_open(os.path.join(out_dir, name), "w") as f:
            f.write("\n".join("\t".join(r) for r in rows) + "\n")
    with atomic_open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(c.format(i + 1) for i, c in enumerate(cases)) + "\n")


def plot(out_dir: str, results) -> List[str]:
    """PNG plots of the ratios, the valid loss and the synonym-aware accuracy over stage-2
    updates, one line per run; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, keys in (("ratios.png", ("pred_corr_ratio", "iter_corr_ratio")),
                       ("losses.png", ("mlm_loss", "syn_acc"))):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, key in zip(axes, keys):
            label = dict((k, l) for k, l, _ in COLUMNS)[key]
            for rid, by_upd in results.items():
                upd = sorted(by_upd)
                ax.plot(upd, [getattr(by_upd[u], key) for u in upd], marker="o", label=rid)
            ax.set_xlabel("updates after the shared stage 1")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        tmp = path + ".tmp.png"
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        os.replace(tmp, path)
        paths.append(path)
    return paths


def machine_description(gpu: bool) -> str:
    """CPU model and core count, or the CUDA device's name."""
    import platform

    import torch

    if gpu and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda}), torch {torch.__version__}"
    cpu = platform.processor() or "CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, no GPU used, torch {torch.__version__}"


def write_summary(path: str, results, cases, meta: dict, command: str) -> None:
    """The tables and cases in Markdown, with the machine and the command (atomically)."""
    s = meta.get("setting", {})
    lines = [
        "# Counter-false-negative study", "",
        f"Command: `{command}`", "",
        f"Machine: {meta.get('machine', '?')}; wall time {meta.get('wall_seconds', 0):.0f}s.", "",
        f"Stage 1: {s.get('stage1_updates')} updates; stage 2: {s.get('stage2_updates')} updates per criterion, "
        f"batch {s.get('batch_size')} x <= {s.get('tokens_per_sample')} tokens, peak lr {s.get('lr')}. Valid: "
        f"{meta.get('valid_masked')} masked words in {meta.get('valid_blocks')} blocks (same masks for every "
        f"checkpoint); <unk> rate {meta.get('unk_rate')}.", "",
        "## Prediction-level correction ratio (%), by share of stage 2 done", "",
        markdown_rows(table2(results, "pred_corr_ratio")), "",
        "## Iteration-level correction ratio (%), by share of stage 2 done", "",
        markdown_rows(table2(results, "iter_corr_ratio")), "",
        "## Iteration-level correction ratio (%) over 512-token units (the paper's sequence length)", "",
        markdown_rows(table2(results, "iter_corr_ratio_512")), "",
        "## Every scored checkpoint (update 0: the shared stage-1 checkpoint)", "",
        markdown_rows(progress_table(results)), "",
        "## Figure-3-style cases", "",
    ]
    lines += [f"{i + 1}. {c.sentence} -- gold **{c.gold}**, prediction **{c.prediction}**; WordNet synonyms of "
              f"'{c.gold}': {', '.join(c.synonyms)}" for i, c in enumerate(cases)]
    with atomic_open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
