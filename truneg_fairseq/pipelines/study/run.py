"""Running the study's commands: each with its full output in a log file, fairseq's progress
echoed, every command recorded for ``commands.sh``, independent ones side by side with their
share of the CPU threads (the pipeline's only process management, in one place)."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.outputs import atomic_open

if TYPE_CHECKING:
    from truneg_fairseq.pipelines.study.setting import Setting


class Runner:
    """Runs commands with their full output in log files, echoes fairseq's progress lines and
    records every command (``commands.sh``). :meth:`run_many` runs independent commands side
    by side, each with its share of the CPU threads."""

    ECHO = (
        "| train_inner |",
        "| valid |",
        "replaced (by",
        "coverage",
        "synonym pairs",
        "vectors from",
        "lines:",
    )

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

    def reuse(
        self,
        name: str,
        items: Sequence[object],
        outputs: Sequence[str],
        what: str,
        remove: bool = True,
        record_dir: Optional[str] = None,
    ):
        """Stage ``name`` (made from ``items``, a command line, into ``outputs``): None when its
        outputs are there and were made from the same items (recorded ``# reused``); else the
        description to :meth:`made` once it has run, with a log line saying what differs; the
        outputs of a stage made otherwise are removed first (they are the pipeline's own), unless
        ``remove`` is False (a command that replaces its own outputs itself). The record is
        kept in ``record_dir`` (default: the work directory; :meth:`made` is given the same)."""
        from truneg_fairseq.outputs import stages

        record_dir = record_dir or self.work
        desc = stages.describe(items, outputs, root=record_dir)
        if outputs and all(os.path.exists(p) for p in outputs):
            why = stages.stale(record_dir, name, desc)
            if why is None:
                self.commands.append(f"# reused {what}")
                return None
            self.log.info(f"{what}: not reused, {why}; made again")
        for path in outputs if remove else ():
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
        stages.forget(record_dir, name)
        return desc

    def made(self, name: str, desc: Optional[List[str]], record_dir: Optional[str] = None) -> None:
        """Record that stage ``name`` was made from ``desc`` (:meth:`reuse`)."""
        from truneg_fairseq.outputs import stages

        if desc is not None:
            stages.record(record_dir or self.work, name, desc)

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

        env = thread_env(parallel)
        self.log.info(
            f"running {len(jobs)} commands, {parallel} at a time, {env['OMP_NUM_THREADS']} thread(s) each: "
            + ", ".join(name for _, name in jobs)
        )
        with ThreadPoolExecutor(parallel) as pool:
            futures = [pool.submit(self._run, cmd, name, env) for cmd, name in jobs]
            try:
                done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            except BaseException:  # Ctrl-C: the running commands stop too, not only this process
                self._stop(futures)
                raise
            failed = [f for f in done if f.exception() is not None]
            if failed:
                self._stop(futures)
                raise failed[0].exception()

    def _stop(self, futures) -> None:
        """Stop the commands running and those not started (the pool's threads then end)."""
        self._stopped = True
        for f in futures:
            f.cancel()
        for proc in list(self._procs):
            proc.terminate()

    def _run(self, cmd: Sequence[str], name: str, env: Optional[dict] = None) -> float:
        if self._stopped:
            return 0.0
        log_path = os.path.join(self.work, "logs", f"{name}.log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        t0 = time.time()
        with open(log_path, "w") as f:
            proc = subprocess.Popen(
                list(cmd),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
            )
            self._procs.add(proc)
            try:
                for line in proc.stdout:
                    f.write(line)
                    if self.echo and any(key in line for key in self.ECHO):
                        self.log.info(f"[{name}] " + line.split("| INFO | ", 1)[-1].rstrip())
                rc = proc.wait()
            except BaseException:  # Ctrl-C or a failure here: the command does not run on alone
                proc.terminate()
                proc.wait()
                raise
            finally:
                self._procs.discard(proc)
        if rc != 0:
            raise SystemExit(
                f"error: {name} failed (exit {rc}); the command and its output are in {log_path}"
            )
        self.seconds[name] = time.time() - t0
        return self.seconds[name]

    def write_commands(self, path: str) -> None:
        with atomic_open(path, "w") as f:
            f.write(
                "#!/bin/bash\n# the commands of this run, in order (steps reused from an earlier run included; "
                "runs listed one after another may have run side by side)\n"
            )
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
