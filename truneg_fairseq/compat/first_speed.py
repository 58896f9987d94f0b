"""The speed of a run's first update (``first_update_speed``).

fairseq 0.12's ``metrics.log_speed`` makes its ``TimeMeter`` when the first value is logged and
resets it there, so that value and the update it measured count nowhere: the first
``train_inner`` line of every run says ``wps=0, ups=0``, whatever the speed. The mend starts
such a meter at the beginning of the update being logged (the ``train_wall`` stopwatch that
fairseq starts with every update in the same aggregator) and counts the first value, so the
first line shows the first update's words and updates per second. A meter with no update to
time from (validation's) is made as fairseq makes it, and every later value goes where
fairseq puts it.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import functools
import time

from .wrapping import wrap_once


def _since_update_start(agg):
    """Seconds of the aggregator's updates so far (the one running included), or None when it
    times no update."""
    wall = agg.get("train_wall")
    start = getattr(wall, "start_time", None)
    if start is None:
        return None
    return float(wall.sum) + (time.perf_counter() - start)


def first_update_speed() -> None:
    """Wrap ``fairseq.logging.metrics.log_speed`` (fairseq's trainer and tasks look it up on
    the module at each call) so that a speed meter made at an update times that update."""
    from fairseq.logging import meters, metrics

    def times_the_update(original):
        @functools.wraps(original)
        def log_speed(key, value, priority=30, round=None):
            for agg in metrics.get_active_aggregators():
                if key in agg:
                    agg[key].update(value)
                    continue
                agg.add_meter(key, meters.TimeMeter(round=round), priority)
                elapsed = _since_update_start(agg)
                if elapsed is None:
                    agg[key].reset()
                else:
                    agg[key].reset(init=elapsed, n=value)

        return log_speed

    wrap_once(metrics, "log_speed", times_the_update, marker="_first_update_speed")
