"""A scoring worker of the demo and the study (a spawned process) logs warnings and errors in
fairseq's format and nothing at INFO: importing fairseq installs a ``logging.basicConfig(level=
DEBUG)`` handler of its own, which printed every worker's INFO lines raw (``INFO:fairseq...``),
once per worker, beside the parent's own log of each score."""

import os
import subprocess
import sys

WORKER = """
import logging, sys
from truneg_fairseq.pipelines.scorer import FixedMaskConfig
from truneg_fairseq.pipelines.study.score import _start_scorer

_start_scorer((sys.argv[1], sys.argv[2], FixedMaskConfig(tokens_per_sample=64)), 1)
logging.getLogger("fairseq.data.data_utils").info("an INFO line of the worker")
logging.getLogger("fairseq.data.data_utils").warning("a warning of the worker")
"""


def test_a_scoring_worker_prints_no_raw_info_lines(data_bin, synonym_table, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(data_bin), str(synonym_table)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "INFO:" not in out and "DEBUG:" not in out, out[-3000:]
    assert "an INFO line" not in out
    assert "| WARNING | fairseq.data.data_utils | a warning of the worker" in proc.stderr
