"""The demo's first look at a tiny size: the real pipeline (WordNet corpus, prepare_corpus.py,
synonym table, fairseq-train for stage 1 and stage 2, scoring on fixed masks) with
--quick prints the first-look table and stops before the full run."""

import re

import pytest
from utils import run_script


@pytest.mark.slow
def test_first_look_prints_its_table_and_quick_stops_there(tmp_path, wn):
    work = tmp_path / "demo"
    proc = run_script(
        "demo.py",
        [
            "--workdir",
            str(work),
            "--quick",
            "--first-look-updates",
            "6",
            "--vocab-size",
            "1500",
            "--max-lines",
            "4000",
            "--batch-size",
            "8",
            "--criteria",
            "masked_lm",
            "--jobs",
            "1",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    out = proc.stdout
    assert "First look: stage 1 masked_lm 6 updates, then each criterion 2 updates" in out
    header = next(line for line in out.splitlines() if line.startswith("run "))
    assert "pred-level %" in header and "iter-level %" in header
    rows = re.findall(r"^roberta_masked_lm\s+(\d+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert [r[0] for r in rows] == ["0", "2"]  # the shared start and the end of stage 2
    assert all(float(r[1]) > 0 for r in rows)  # a valid loss in bits
    assert re.search(r"\(first look after \d+s\)", out)
    results = work / "first_look" / "results"
    assert (results / "progress.tsv").read_text().startswith("run\tupdate\t")
    assert (results / "commands.sh").is_file()
    # --quick: the full run never started
    assert not (work / "checkpoints").exists() and not (work / "results").exists()
    assert "The full run goes on" not in out


def test_quick_without_a_first_look_is_one_line(tmp_path):
    proc = run_script(
        "demo.py", ["--workdir", str(tmp_path / "d"), "--quick", "--first-look-updates", "0"]
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: --quick runs the first look only: give --first-look-updates N > 0 with it\n"
    )
