"""fairseq's prefetching threads stop before the interpreter exits (``stop_prefetch_at_exit``):
a thread still filling its queue at exit (fairseq-train stopping at ``--max-update`` mid-epoch)
aborted the interpreter (exit status 134).

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time


def _stop_prefetch_threads(timeout: float = 10.0) -> int:
    """Stop fairseq's live ``BackgroundConsumer`` threads after the batch each has in hand;
    returns how many were stopped."""
    from fairseq.data.iterators import BackgroundConsumer

    stopped = 0
    for t in threading.enumerate():
        if not isinstance(t, BackgroundConsumer) or not t.is_alive():
            continue
        t._max_len = 0  # its loop breaks after the next put
        deadline = time.monotonic() + timeout
        while t.is_alive() and time.monotonic() < deadline:
            try:
                while True:
                    t._queue.get_nowait()  # room for its put and its end marker
            except queue.Empty:
                pass
            t.join(0.05)
        stopped += not t.is_alive()
    return stopped


def stop_prefetch_at_exit() -> None:
    """Run :func:`_stop_prefetch_threads` at interpreter exit."""
    atexit.register(_stop_prefetch_threads)
