"""``fairseq-train --user-dir truneg_fairseq --bf16``: fp32 weights, the forward pass and loss under
bf16 autocast, no loss scaler, for every objective. Each objective trains a tiny model for a few
updates in fp32 and in bf16 from the same seed with the real fairseq-train (bf16 autocast on the
CPU): the logged losses track, the checkpoint holds fp32 weights, and the bf16 run resumes."""

import re

import pytest
import torch
from corpus_fixtures import make_classification_data
from fairseq_runs import (
    TINY_ELECTRA,
    TINY_ELECTRA_MODEL,
    TINY_ROBERTA,
    arch_for,
    build_components,
    fairseq_train,
    updates,
    valid_batch,
)
from finetune_flags import sentence_prediction_args
from objective_cases import criteria_with_terms
from squad_fixtures import write_squad_dir

from truneg_fairseq.precision import AUTOCAST_ATTR
from truneg_fairseq.text import TokenizerSpec

UPDATES = 3
# bf16 keeps 8 bits of mantissa: a matmul's relative error is ~2^-8 per product, averaged over the
# sums; after a few updates a loss agrees with fp32 to about 1%
REL_TOL = 0.02
BF16_LINE = (
    "--bf16: fp32 weights and optimizer, forward pass and loss under torch.autocast(bfloat16)"
)


def losses(log):
    """Per-update training losses and the validation loss as logged."""
    train = [float(x) for x in re.findall(r"train_inner \|.*? loss=([\d.]+)", log)]
    valid = [float(x) for x in re.findall(r"valid on 'valid' subset \| loss ([\d.]+)", log)]
    return train, valid


def bf16_against_fp32(data, tmp_path, args):
    """Train ``args`` for UPDATES updates in fp32 and in bf16, compare the losses, check the bf16
    checkpoint is fp32 and resume it for two more updates."""
    runs = {}
    for mode, extra in (("fp32", []), ("bf16", ["--bf16"])):
        out = fairseq_train(data, tmp_path / mode, [*args, *extra, "--max-update", str(UPDATES)])
        runs[mode] = out.stdout + out.stderr
    assert BF16_LINE in runs["bf16"] and BF16_LINE not in runs["fp32"]
    (t32, v32), (t16, v16) = losses(runs["fp32"]), losses(runs["bf16"])
    assert len(t32) == len(t16) == UPDATES and len(v32) == len(v16) >= 1, (t32, t16, v32, v16)
    for a, b in zip(t32 + v32, t16 + v16):
        assert abs(a - b) <= REL_TOL * abs(a) + 1e-3, (t32, t16, v32, v16)
    worst = max(abs(a - b) / abs(a) for a, b in zip(t32 + v32, t16 + v16))
    print(
        f"bf16 vs fp32: largest relative difference of a logged loss {worst:.4f}"
    )  # pytest -s shows it

    # the same tensors with the same dtypes as the fp32 run's: fp32 weights (and any float64
    # buffer, such as ELECTRA's LayerNorm epsilon, as it is)
    state, ref = (
        torch.load(tmp_path / mode / "checkpoint_last.pt", map_location="cpu", weights_only=False)
        for mode in ("bf16", "fp32")
    )
    dtypes = {k: v.dtype for k, v in state["model"].items()}
    assert dtypes == {k: v.dtype for k, v in ref["model"].items()}
    assert torch.float32 in dtypes.values() and not {torch.bfloat16, torch.float16} & set(
        dtypes.values()
    )
    assert not state["cfg"]["common"]["bf16"] and not state["cfg"]["common"]["tpu"]

    again = fairseq_train(
        data, tmp_path / "bf16", [*args, "--bf16", "--max-update", str(UPDATES + 2)]
    )
    log = again.stdout + again.stderr
    assert "Loaded checkpoint" in log and f"@ {UPDATES} updates" in log and BF16_LINE in log
    assert updates(log) == UPDATES + 2
    return runs


def test_task_steps_run_the_criterion_under_bf16_autocast(data_bin):
    """fairseq's own masked_lm task (its train_step and valid_step, mended): the model's linear
    layers compute in bf16 when the task is marked, in fp32 otherwise; weights and gradients
    stay fp32."""
    from fairseq import optim
    from fairseq.optim.adam import FairseqAdam  # noqa: F401  (a real optimizer for train_step)
    from omegaconf import OmegaConf

    task, model, crit = build_components(data_bin, ["--criterion", "masked_lm"])
    sample = valid_batch(task)
    seen = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
    ]
    opt = optim.build_optimizer(
        OmegaConf.create({"_name": "sgd", "lr": [0.1], "momentum": 0.0, "weight_decay": 0.0}),
        list(model.parameters()),
    )
    for marked in (False, True):
        setattr(task, AUTOCAST_ATTR, marked)
        seen.clear()
        model.zero_grad()
        loss, _, _ = task.train_step(sample, model, crit, opt, update_num=0)
        want = torch.bfloat16 if marked else torch.float32
        assert seen and set(seen) == {want}
        assert all(
            p.dtype == torch.float32 and p.grad.dtype == torch.float32
            for p in model.parameters()
            if p.grad is not None
        )
        seen.clear()
        task.valid_step(sample, model, crit)
        assert seen and set(seen) == {want}
    for h in hooks:
        h.remove()


def test_bf16_with_amp_is_refused(data_bin, tmp_path):
    proc = fairseq_train(
        data_bin,
        tmp_path / "c",
        [*TINY_ROBERTA, "--criterion", "masked_lm", "--bf16", "--amp", "--max-update", "1"],
        check=False,
    )
    assert proc.returncode != 0
    assert "--bf16 and --amp are two mixed-precision modes: give one of them" in proc.stderr


@pytest.mark.parametrize("criterion", ["masked_lm", *criteria_with_terms()])
def test_masked_lm_objectives(data_bin, synonym_table, tmp_path, criterion):
    table = [] if criterion == "masked_lm" else ["--synonym-table", "synonyms.npz"]
    bf16_against_fp32(data_bin, tmp_path, [*arch_for(criterion), "--criterion", criterion, *table])


def test_electra(data_bin, synonym_table, tmp_path):
    runs = bf16_against_fp32(
        data_bin,
        tmp_path,
        [
            *TINY_ELECTRA,
            "--task",
            "electra",
            "--criterion",
            "electra",
            "--synonym-table",
            "synonyms.npz",
        ],
    )
    assert "disc_loss=" in runs["bf16"]


def test_cline(corpus_dir, data_bin, wn, tmp_path):
    from truneg_fairseq.data import cline_data as cline

    settings = cline.Settings(
        seed=1, tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    cline.make_cline_data(
        {"train": corpus_dir / "raw" / "valid.txt", "valid": corpus_dir / "raw" / "valid.txt"},
        tmp_path / "cline",
        settings,
        srcdict=data_bin / "dict.txt",
        wn=wn,
    )
    runs = bf16_against_fp32(
        tmp_path / "cline" / "data-bin",
        tmp_path,
        [
            "--task",
            "cline",
            "--criterion",
            "cline",
            "--arch",
            "cline_roberta_tiny",
            *TINY_ROBERTA[2:-2],
            "--tokens-per-sample",
            "64",
        ],
    )
    assert "rtd_loss=" in runs["bf16"]


def test_sentence_prediction(corpus_dir, tmp_path):
    data = make_classification_data(corpus_dir, tmp_path / "cls")
    bf16_against_fp32(data, tmp_path, sentence_prediction_args(TINY_ELECTRA_MODEL))


def test_squad(data_bin, corpus_dir, tmp_path):
    sq = write_squad_dir(tmp_path / "squad", data_bin / "dict.txt", n_copies=1)
    bf16_against_fp32(
        sq,
        tmp_path,
        [
            *TINY_ELECTRA_MODEL,
            "--task",
            "squad",
            "--criterion",
            "squad",
            "--squad-spm-model",
            str(corpus_dir / "spm.model"),
            "--squad-max-len",
            "64",
            "--squad-doc-stride",
            "16",
            "--squad-max-query",
            "16",
            "--required-batch-size-multiple",
            "1",
        ],
    )
