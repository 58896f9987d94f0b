"""The number of CPU threads a command's torch uses when ``OMP_NUM_THREADS`` is unset.

torch then starts one OpenMP thread per core whatever else runs: on a 2-core machine busy with
other work, 20 steps of a tiny model took 26.3 s with 2 threads and 1.76 s with one (the
threads wait for each other on every operation). torchrun sets ``OMP_NUM_THREADS=1`` for its
workers for the same reason. A command that finds it unset sets it, before torch is imported, to
the cores this process may use divided by the processes of this job on the machine
(``LOCAL_WORLD_SIZE``), less the cores the load average says are busy, at least 1; it says so
once on stderr, and the processes it starts inherit the choice. Set ``OMP_NUM_THREADS`` to
choose another number.
"""

import os
import sys


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def choose_threads(cores: int, processes: int, load: float) -> int:
    """Threads per process: ``cores // processes``, less the cores busy by the 1-minute load
    average ``load`` (rounded), at least 1."""
    share = cores // max(1, processes)
    idle = cores - int(round(load))
    return max(1, min(share, idle))


def set_threads_if_unset() -> None:
    """Set ``OMP_NUM_THREADS`` (see the module docstring) where it is unset or empty."""
    if os.environ.get("OMP_NUM_THREADS"):
        return
    cores = usable_cores()
    try:
        processes = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    except ValueError:
        processes = 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    n = choose_threads(cores, processes, load)
    os.environ["OMP_NUM_THREADS"] = str(n)
    if "torch" in sys.modules:  # imported already (the package used as a library): told directly
        sys.modules["torch"].set_num_threads(n)
    print(
        f"note: OMP_NUM_THREADS is unset: using {n} CPU thread(s) ({cores} cores, load "
        f"{load:.1f}, {processes} process(es)); set OMP_NUM_THREADS to choose",
        file=sys.stderr,
    )
