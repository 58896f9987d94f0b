"""The framework-free core (truneg_fairseq/core): it imports torch, numpy and the standard library
only; the core and the HF front end import and train where fairseq cannot be imported; the two
front ends share its step, its statistics and ELECTRA's sampling."""

import ast
import os
import subprocess
import sys

import pytest
import torch
from repo_paths import REPO

CORE = REPO / "truneg_fairseq" / "core"
# what the core may import besides the standard library
ALLOWED = {"torch", "numpy"}
ALLOWED_PACKAGE = ("truneg_fairseq.core", "truneg_fairseq.errors", "truneg_fairseq.outputs")


def imported_modules(path):
    """Every module a file imports, at module level or inside a function (absolute names)."""
    tree = ast.parse(path.read_text())
    package = "truneg_fairseq.core"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}" if node.module else base
            else:
                yield node.module


def test_the_core_imports_only_torch_numpy_and_the_standard_library():
    files = sorted(CORE.glob("*.py"))
    assert len(files) >= 8
    bad = []
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ALLOWED:
                continue
            if name.startswith(ALLOWED_PACKAGE):
                continue
            bad.append(f"{path.name}: {name}")
    assert bad == []
    # the errors module the core raises is a leaf of the standard library
    for leaf in ("errors.py", "outputs/output_errors.py"):
        for name in imported_modules(REPO / "truneg_fairseq" / leaf):
            assert name.split(".")[0] in sys.stdlib_module_names or name.startswith(
                ALLOWED_PACKAGE
            ), (leaf, name)


def _without_fairseq(code: str, timeout: int = 120):
    """Run ``code`` in a fresh interpreter where ``import fairseq`` fails."""
    prelude = (
        "import sys\n"
        "for _m in ('fairseq', 'fairseq_cli', 'omegaconf', 'hydra'):\n"
        "    sys.modules[_m] = None\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=str(REPO),
    )


def test_the_core_and_the_hf_front_end_import_without_fairseq():
    out = _without_fairseq(
        "import truneg_fairseq, truneg_fairseq.hf\n"
        "import truneg_fairseq.core.step, truneg_fairseq.core.masking, truneg_fairseq.core.sums\n"
        "from truneg_fairseq.hf import TrueNegativeMLM, ElectraPretraining, MaskedLMCollator\n"
        "assert not truneg_fairseq._registered\n"
        "assert not [m for m in sys.modules if m.startswith(('truneg_fairseq.criterions', "
        "'truneg_fairseq.compat', 'truneg_fairseq.models', 'truneg_fairseq.tasks'))]\n"
        "print('imported')\n"
    )
    assert out.returncode == 0 and "imported" in out.stdout, out.stderr[-3000:]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    import transformers
    from corpus_fixtures import tiny_corpus_lines
    from hf_fixtures import bert_config, wordpiece_vocab, write_vocab

    root = tmp_path_factory.mktemp("core_hf")
    vocab = wordpiece_vocab()
    torch.manual_seed(0)
    transformers.BertForMaskedLM(bert_config(len(vocab))).save_pretrained(str(root / "bert"))
    write_vocab(root / "bert", vocab)
    (root / "train.txt").write_text("\n".join(tiny_corpus_lines(40, seed=5)) + "\n")
    return root


def test_hf_train_trains_without_fairseq(tiny_bert, tmp_path):
    """truneg-hf-train: a few hard-correction-free steps (no synonym table needs no WordNet
    either), the model saved, with fairseq unimportable."""
    argv = [
        str(tiny_bert / "bert"), "--train", str(tiny_bert / "train.txt"),
        "--output-dir", str(tmp_path / "out"), "--objective", "mlm", "--cpu",
        "--batch-size", "4", "--seq-len", "32", "--max-steps", "3", "--log-steps", "1",
        "--report-to", "none",
    ]  # fmt: skip
    out = _without_fairseq(
        "from truneg_fairseq.cli.hf_train import main\n"
        f"code = main({argv!r})\n"
        "assert 'fairseq' not in [m.split('.')[0] for m in sys.modules if sys.modules[m]]\n"
        "sys.exit(code)\n",
        timeout=150,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert "mlm_acc" in out.stdout + out.stderr


def test_the_front_ends_share_the_step_and_electra_sampling():
    """One step, one definition of the statistics, one Gumbel sampler: the fairseq criterion and
    the HF objective call the core's, and no module outside the core defines its own."""
    pkg = REPO / "truneg_fairseq"
    for front in ("criterions/cfn_base.py", "hf/objective.py"):
        assert "masked_lm_step(" in (pkg / front).read_text(), front
    outside = [
        p.relative_to(pkg).as_posix()
        for p in pkg.rglob("*.py")
        if "core" not in p.parts
        and any(s in p.read_text() for s in ("rand_like(", "def step_counts", "def derive"))
    ]
    assert outside == []


SUMS = [
    # hard correction with a table that names content words, static slots that dropped some
    dict(loss=812.5, mlm_loss=830.0, corrected_loss=17.5, sample_size=300, ntokens=2000,
         nsentences=16, fn_sequences=16, fn_masked_sequences=15, fn_synonym_sequences=4,
         fn_masked=280, fn_correct=90, fn_synonym=6, fn_content=120, fn_special_masked=20,
         slots_dropped=3, updates=2),
    # soft regularization without a table
    dict(loss=900.0, mlm_loss=850.0, sr_loss=50.0, sr_dist_sum=50.0, sample_size=310,
         ntokens=2000, nsentences=16, fn_sequences=16, fn_masked_sequences=16, fn_masked=300,
         fn_correct=80, fn_special_masked=10),
    # ELECTRA with a table and the sentence KL
    dict(loss=5000.0, mlm_loss=800.0, kl_loss=12.0, disc_loss=4188.0, sample_size=290,
         ntokens=2000, nsentences=16, fn_sequences=16, fn_masked_sequences=16, fn_masked=270,
         fn_correct=70, fn_synonym=5, fn_synonym_sequences=3, fn_special_masked=20,
         disc_bce_sum=900.0, disc_tokens=1900, disc_correct=1700, rtd_replaced=250,
         rtd_true_pos=200, rtd_pred_pos=260, rtd_pos=250, rtd_synonym=4),
]  # fmt: skip


@pytest.mark.parametrize("summed", SUMS, ids=["hc", "sr", "electra_kl"])
def test_logged_values_are_what_fairseq_logs(summed):
    """The HF front end's reduction (core.statistics.logged_values) gives the values, names,
    rounding and order that fairseq's meters log for the same sums through the criterion."""
    from fairseq.logging import metrics

    from truneg_fairseq.core.statistics import logged_values
    from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss

    with metrics.aggregate(new_root=True) as agg:
        CounterFalseNegativeLoss.reduce_metrics([summed])
    fairseq_values = {
        k: float(v) for k, v in agg.get_smoothed_values().items() if not k.startswith("_")
    }
    ours = logged_values(summed)
    assert ours == fairseq_values
    assert list(ours) == list(fairseq_values)
