"""``--task batch_masked_lm --batch-mlm-compile``: the plugin's RoBERTa compiled as ELECTRA is.
Scope ``update`` (truneg_fairseq/training/compiled_update.py) traces the whole update as one graph
and trains as the eager update does (the same log, weights and AdamW moments under a moving
learning rate, fp32 and --bf16); scope ``model`` compiles the model's forward in place and logs
eager's losses; under the flag every training batch has one shape (padded to
--tokens-per-sample columns, short batches dropped and counted); the flag refuses what it cannot
compile in one line. Traced with the ``aot_eager`` backend (the same graph, no generated code)."""

import logging

import pytest
import torch
from fairseq_runs import TINY_ROBERTA, TINY_TN_ROBERTA, build_components, fairseq_train
from step_checks import assert_trained_alike, cuda_graph_refusals, recording_aot_eager
from test_compiled_update import _run

from truneg_fairseq.errors import FlagError
from truneg_fairseq.tasks.batch_masked_lm import BatchMaskedLMTask
from truneg_fairseq.training.compiled_update import CompiledUpdate

ARGS = [
    *TINY_TN_ROBERTA,
    "--task", "batch_masked_lm", "--criterion", "mlm_hard_correction",
    "--optimizer", "fused_adamw", "--fused-adamw-weight-decay", "0.01", "--clip-norm", "1.0",
    "--max-update", "6", "--log-interval", "2", "--log-format", "json", "--disable-validation",
    "--synonym-table", "synonyms.npz", "--mlm-prediction-slots", "static",
    "--sample-break-mode", "complete", "--lr-scheduler", "polynomial_decay",
    "--warmup-updates", "3", "--total-num-update", "10", "--lr", "1e-3",
    "--batch-mlm-compile",
]  # fmt: skip


@pytest.fixture
def traced(monkeypatch):
    """Both scopes traced with aot_eager; dynamo's caches and counters fresh before and after."""
    monkeypatch.setattr(CompiledUpdate, "backend", "aot_eager")
    monkeypatch.setattr(BatchMaskedLMTask, "compile_backend", "aot_eager")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def _same_logs(compiled_logs, eager_logs):
    assert len(compiled_logs) == 3 and compiled_logs[0].keys() == eager_logs[0].keys()
    for a, b in zip(compiled_logs, eager_logs):
        for key in a:
            assert float(a[key]) == pytest.approx(float(b[key]), rel=2e-3, abs=1e-3), key


@pytest.mark.parametrize("precision", [[], ["--bf16"]], ids=["fp32", "bf16"])
def test_the_compiled_update_is_one_graph_and_trains_as_the_eager_one(
    precision, data_bin, synonym_table, tmp_path, monkeypatch, traced
):
    args = [*ARGS, "--batch-mlm-compile-scope", "update", *precision]
    graphs = []
    monkeypatch.setattr(CompiledUpdate, "backend", recording_aot_eager(graphs))
    compiled_out, compiled_logs, compiled = _run(data_bin, tmp_path / "compiled", args)
    assert "training updates: compiled as one graph (forward, backward, clipping, AdamW)" in (
        compiled_out
    )
    assert not torch._dynamo.utils.counters["graph_break"]
    # one graph for the one kind of batch (and at most one more for its token count, symbolic)
    assert 1 <= torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 2
    assert graphs and cuda_graph_refusals(graphs) == []  # nothing CUDA graphs refuse

    # the reference: the same run and batches, every update eager
    monkeypatch.setattr(CompiledUpdate, "ready", lambda self: False)
    eager_out, eager_logs, eager = _run(data_bin, tmp_path / "eager", args)
    assert "compiled as one graph" not in eager_out

    _same_logs(compiled_logs, eager_logs)
    assert_trained_alike(compiled, eager, bf16=bool(precision))


def test_the_compiled_model_logs_the_eager_losses(
    data_bin, synonym_table, tmp_path, monkeypatch, traced
):
    """Scope ``model``: the forward compiled in place as one graph (checkpoint keys unchanged),
    the first update's time logged, the losses of the same run uncompiled."""
    args = [*ARGS, "--batch-mlm-compile-scope", "model"]
    out, compiled_logs, compiled = _run(data_bin, tmp_path / "compiled", args)
    assert "--batch-mlm-compile (model): the first update took" in out
    assert not torch._dynamo.utils.counters["graph_break"]
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1

    monkeypatch.setattr(BatchMaskedLMTask, "compile_model", lambda self, model, *a, **k: None)
    _, eager_logs, eager = _run(data_bin, tmp_path / "eager", args)
    _same_logs(compiled_logs, eager_logs)
    assert list(compiled["model"]) == list(eager["model"])  # no "_orig_mod." in any key


def _epoch(task, bsz=8):
    task.load_dataset("train")
    itr = task.get_batch_iterator(
        dataset=task.dataset("train"), max_sentences=bsz, max_positions=64, seed=1, epoch=1
    )
    return list(itr.next_epoch_itr(shuffle=True))


def test_compiled_training_batches_have_one_shape(data_bin, synonym_table, caplog):
    """Blocks of whole sentences (--sample-break-mode complete) are padded to
    --tokens-per-sample columns, padding in input and target; the short last batch is dropped
    and counted; validation keeps every batch."""
    flags = ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)]
    flags += ["--mlm-prediction-slots", "static", "--sample-break-mode", "complete"]
    flags += ["--batch-size", "8"]
    task = build_components(data_bin, flags, TINY_TN_ROBERTA, task="batch_masked_lm")[0]
    plain = _epoch(task)
    assert len({tuple(b["net_input"]["src_tokens"].shape) for b in plain}) > 2

    compiled_task = build_components(
        data_bin, [*flags, "--batch-mlm-compile"], TINY_TN_ROBERTA, task="batch_masked_lm"
    )[0]
    with caplog.at_level(logging.INFO, logger="truneg_fairseq.tasks.batch_masked_lm"):
        batches = _epoch(compiled_task)
    assert {tuple(b["net_input"]["src_tokens"].shape) for b in batches} == {(8, 64)}
    dropped = len(plain) - len(batches)
    assert dropped == 1 and f"1 of {len(plain)} training batches dropped" in caplog.text

    pad = task.source_dictionary.pad()
    kept = {tuple(b["id"].tolist()): b for b in plain}
    for batch in batches:
        same = kept[tuple(batch["id"].tolist())]  # the batch without the flag: same masks
        width = same["target"].size(1)
        for key in ("src_tokens", "target"):
            padded = batch["net_input"][key] if key == "src_tokens" else batch[key]
            original = same["net_input"][key] if key == "src_tokens" else same[key]
            assert torch.equal(padded[:, :width], original)
            assert bool((padded[:, width:] == pad).all())
        assert batch["ntokens"] == same["ntokens"]

    compiled_task.load_dataset("valid")
    valid = compiled_task.get_batch_iterator(
        dataset=compiled_task.dataset("valid"), max_sentences=8, max_positions=64, seed=1
    )
    valid = list(valid.next_epoch_itr(shuffle=False))
    assert sum(len(b["id"]) for b in valid) == len(compiled_task.dataset("valid"))
    assert min(len(b["id"]) for b in valid) < 8  # the short batch too
    assert {b["target"].size(1) for b in valid} == {64}


def test_what_the_flag_cannot_compile_is_refused(data_bin, synonym_table):
    flags = ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)]
    static = [*flags, "--mlm-prediction-slots", "static", "--batch-mlm-compile"]
    with pytest.raises(FlagError, match="--batch-mlm-compile needs --batch-size N"):
        build_components(data_bin, static, TINY_TN_ROBERTA, task="batch_masked_lm")
    sized = [*static, "--batch-size", "8"]
    with pytest.raises(FlagError, match="use --arch truneg_roberta_base") as refused:
        build_components(data_bin, sized, TINY_ROBERTA, task="batch_masked_lm")
    assert "--batch-mlm-compile" in str(refused.value) and "bert_hf" in str(refused.value)
    dynamic = [*flags, "--batch-mlm-compile", "--batch-size", "8"]
    with pytest.raises(FlagError, match="needs --mlm-prediction-slots static"):
        build_components(data_bin, dynamic, TINY_TN_ROBERTA, task="batch_masked_lm")


def test_where_the_update_cannot_be_compiled_the_model_is(
    data_bin, synonym_table, tmp_path, traced
):
    """fairseq's adam keeps fairseq's update: the model is compiled, and the log says why."""
    args = list(ARGS)
    args[args.index("fused_adamw")] = "adam"
    del args[args.index("--fused-adamw-weight-decay") : args.index("--clip-norm")]
    args[args.index("--max-update") + 1] = "2"
    run = fairseq_train(data_bin, tmp_path / "adam", [*args, "--batch-mlm-compile-scope", "update"])
    out = run.stdout + run.stderr
    assert (
        "--batch-mlm-compile-scope update: the model is compiled instead (fairseq's update: an "
        "optimizer other than --optimizer fused_adamw" in out
    )
    assert "compiled as one graph" not in out
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
