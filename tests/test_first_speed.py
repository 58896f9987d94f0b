"""The speed columns of a run's first log line: fairseq's speed meters start at the first value
they are given and drop it, so every run's first ``train_inner`` line said ``wps=0, ups=0``; a
meter made at an update times that update (the plugin's mend)."""

import re

from fairseq_runs import TINY_ROBERTA, fairseq_train


def _speeds(log: str):
    return [
        (float(m.group(1)), float(m.group(2)))
        for m in re.finditer(r"\| train_inner \| .*?wps=([\d.]+), ups=([\d.]+)", log)
    ]


def test_the_first_train_inner_line_has_the_first_updates_speed(data_bin, tmp_path):
    proc = fairseq_train(
        data_bin,
        tmp_path / "run",
        [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2", "--log-interval", "1"],
    )
    speeds = _speeds(proc.stdout)
    assert len(speeds) == 2, proc.stdout[-3000:]
    assert all(wps > 0 and ups > 0 for wps, ups in speeds), speeds


def test_a_meter_made_outside_an_update_starts_as_fairseqs():
    """Validation's meters time no update: the first value starts the meter, as fairseq does."""
    from fairseq.logging import metrics

    import truneg_fairseq  # noqa: F401  (the plugin's mends)

    with metrics.aggregate(new_root=True) as agg:
        metrics.log_speed("wps", 100.0)
        assert agg["wps"].n == 0
        metrics.log_speed("wps", 50.0)
        assert agg["wps"].n == 50.0
