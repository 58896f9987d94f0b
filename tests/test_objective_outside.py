"""An objective written outside the package (examples/objectives/synonym_smoothing: one file
with the registry's decorator) trains in both front ends without an edit of the package:
``fairseq-train --user-dir THEIRS --criterion NAME``, ``truneg-hf-train --user-dir THEIRS
--objective NAME`` and ``TrueNegativeMLM(..., objective=NAME)``, its term and statistic logged.
The folder is copied to a temporary directory first: nothing of the checkout is imported by
path."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq_runs import TINY_ROBERTA, fairseq_train, updates
from hf_fixtures import tiny_bert_and_texts
from objective_cases import registry_kept
from repo_paths import REPO

EXAMPLE = REPO / "examples" / "objectives" / "synonym_smoothing"


@pytest.fixture
def theirs(tmp_path):
    """The example objective's package, copied to a folder of its own."""
    path = tmp_path / "theirs" / "synonym_smoothing"
    shutil.copytree(EXAMPLE, path, ignore=shutil.ignore_patterns("__pycache__"))
    return path


def values(log: str, name: str):
    return [float(v) for v in re.findall(rf"\b{name}[=| ]+([\d.]+)", log)]


def test_fairseq_train_with_their_user_dir(data_bin, synonym_table, theirs, tmp_path):
    args = [*TINY_ROBERTA, "--criterion", "mlm_synonym_smoothing", "--synonym-table"]
    args += ["synonyms.npz", "--smoothing-eps", "0.2", "--max-update", "3"]
    proc = fairseq_train(data_bin, tmp_path / "ckpt", args, cli=True, user_dir=str(theirs))
    log = proc.stdout + proc.stderr
    assert updates(log) == 3
    assert values(log, "smooth_loss") and values(log, "mlm_acc")
    assert max(values(log, "smoothed")) > 0  # the gold words of the corpus have synonyms
    assert "'smoothing_eps': 0.2" in log  # fairseq's printed config: the owner's prefix


@pytest.mark.slow
def test_hf_train_with_their_user_dir(theirs, tmp_path):
    tiny = tiny_bert_and_texts(tmp_path / "tiny")
    script = Path(sys.executable).with_name("truneg-hf-train")
    cmd = [str(script), str(tiny / "bert"), "--train", str(tiny / "texts"), "--output-dir"]
    cmd += [str(tmp_path / "run"), "--cpu", "--batch-size", "4", "--seq-len", "32"]
    cmd += ["--mask-prob", "0.3", "--report-to", "none", "--max-steps", "2", "--log-steps", "1"]
    cmd += ["--user-dir", str(theirs), "--objective", "synonym_smoothing", "--eps", "0.3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert values(log, "smooth_loss_bits") and max(values(log, "smoothed")) > 0
    record = (tmp_path / "run" / "checkpoint-2" / "truneg_run.json").read_text()
    assert '"eps": 0.3' in record and '"objective": "synonym_smoothing"' in record
    # its flag is refused with another objective, as every objective's is
    proc = subprocess.run([*cmd[:-4], "--eps", "0.3"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--eps is a parameter of --objective synonym_smoothing" in (
        proc.stderr
    )


@pytest.fixture
def imported(theirs):
    """Their package imported here, taken out of the registry afterwards."""
    from truneg_fairseq.core.objectives import import_user_dir

    with registry_kept():
        yield import_user_dir(str(theirs))


def test_true_negative_mlm_takes_their_objective(imported, tmp_path):
    from transformers import AutoTokenizer, BertForMaskedLM

    from truneg_fairseq.hf import MaskedLMCollator, TrueNegativeMLM, build_synonym_table

    tiny = tiny_bert_and_texts(tmp_path)
    tok = AutoTokenizer.from_pretrained(str(tiny / "bert"))
    table, _ = build_synonym_table(tok)
    lines = (tiny / "texts" / "a.txt").read_text().split("\n")[:16]
    features = [{"input_ids": tok(x)["input_ids"], "index": i} for i, x in enumerate(lines)]
    batch = MaskedLMCollator(tok, mask_prob=0.3, seed=3)(features)
    model = BertForMaskedLM.from_pretrained(str(tiny / "bert"))
    runs = {}
    for eps in (0.0, 0.5):
        obj = TrueNegativeMLM(model, tok, "synonym_smoothing", table, eps=eps)
        out = obj(**{k: v for k, v in batch.items() if k != "index"})
        runs[eps] = out
    plain = TrueNegativeMLM(model, tok, "mlm", table)(
        **{k: v for k, v in batch.items() if k != "index"}
    )
    log = runs[0.5]["logging"]
    assert float(log["smoothed_sum"]) > 0 and "smooth_loss" in log
    assert torch.equal(runs[0.0]["loss"], plain["loss"])  # eps 0: plain masked LM
    expected = plain["loss"] + 0.5 * log["smooth_loss"]
    assert torch.allclose(runs[0.5]["loss"], expected)
    with pytest.raises(ValueError, match="needs a synonym table"):
        TrueNegativeMLM(model, tok, "synonym_smoothing")
