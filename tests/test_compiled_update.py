"""The whole update as one compiled graph (``--electra-compile-scope update``,
truneg_fairseq/training/compiled_update.py): traced with ``fullgraph=True`` (forward, backward,
clipping, AdamW), it trains as the eager update does: the same log and weights under a moving
learning rate, fp32 and --bf16; its AdamW skips a non-finite update and otherwise equals PyTorch's
fused kernel; where it cannot apply, the model is compiled instead and the log says why. Traced
with the ``aot_eager`` backend (the same graph, no generated code)."""

import json

import pytest
import torch
from fairseq_runs import TINY_ELECTRA, fairseq_train
from step_checks import assert_trained_alike, cuda_graph_refusals, recording_aot_eager

from truneg_fairseq.training.compiled_update import CompiledUpdate

ARGS = [
    *TINY_ELECTRA,
    "--task", "electra", "--criterion", "electra", "--optimizer", "fused_adamw",
    "--fused-adamw-weight-decay", "0.01", "--clip-norm", "1.0", "--max-update", "6",
    "--log-interval", "2", "--log-format", "json", "--disable-validation",
    "--synonym-table", "synonyms.npz", "--mlm-prediction-slots", "static",
    "--lr-scheduler", "polynomial_decay", "--warmup-updates", "3", "--total-num-update", "10",
    "--lr", "1e-3", "--electra-compile", "--electra-compile-scope", "update",
]  # fmt: skip
TIMED = ("wps", "ups", "wall", "train_wall")


def _run(data_bin, path, args):
    run = fairseq_train(data_bin, path, args)
    out = run.stdout + run.stderr
    logs = [
        {
            k: v
            for k, v in json.loads(line.split("| train_inner | ", 1)[1]).items()
            if k not in TIMED
        }
        for line in run.stdout.splitlines()
        if "| train_inner | " in line
    ]
    state = torch.load(path / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    return out, logs, state


@pytest.mark.slow
@pytest.mark.parametrize(
    "precision", [[], ["--bf16"], ["--update-freq", "2"]], ids=["fp32", "bf16", "update-freq-2"]
)
def test_the_compiled_update_is_one_graph_and_trains_as_the_eager_one(
    precision, data_bin, synonym_table, tmp_path, monkeypatch
):
    graphs = []
    monkeypatch.setattr(CompiledUpdate, "backend", recording_aot_eager(graphs))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled_out, compiled_logs, compiled = _run(
        data_bin, tmp_path / "compiled", [*ARGS, *precision]
    )
    several = "--update-freq" in precision
    if several:  # a batch's forward and backward, replayed once a batch; then the optimizer
        said = "compiled as two graphs (a batch's forward and backward; clipping, AdamW)"
    else:
        said = "compiled as one graph (forward, backward, clipping, AdamW)"
    assert f"training updates: {said} in" in compiled_out
    assert "still waits for the device" not in compiled_out  # static slots
    assert not torch._dynamo.utils.counters["graph_break"]
    # one graph per kind of batch (with and without padding), not one per update
    graphs_made = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert 1 + several <= graphs_made <= 2 + several
    # nothing in it that CUDA graphs refuse (a host read, a data-dependent shape, an operator
    # tagged unsafe): inductor's own test before it records them
    assert graphs and cuda_graph_refusals(graphs) == []

    # the reference: the same run and batches, every update eager
    monkeypatch.setattr(CompiledUpdate, "ready", lambda self: False)
    eager_out, eager_logs, eager = _run(data_bin, tmp_path / "eager", [*ARGS, *precision])
    assert "compiled as one graph" not in eager_out
    torch._dynamo.reset()

    assert len(compiled_logs) == 3 and compiled_logs[0].keys() == eager_logs[0].keys()
    for a, b in zip(compiled_logs, eager_logs):
        for key in a:
            assert float(a[key]) == pytest.approx(float(b[key]), rel=2e-3, abs=1e-3), key
    assert_trained_alike(compiled, eager, bf16="--bf16" in precision)


class _Group:
    """What the update's AdamW reads of its trainer: the parameters and one AdamW state."""

    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed)
        self.params = [torch.randn(5, 3, generator=g), torch.randn(4, generator=g)]
        self.state = (
            [torch.randn(p.shape, generator=g) * 0.1 for p in self.params],
            [torch.rand(p.shape, generator=g) * 0.01 for p in self.params],
            [torch.tensor(3.0) for _ in self.params],
        )
        self.grads = [torch.randn(p.shape, generator=g) for p in self.params]


def _adamw(group, finite, lr=1e-2, used=None):
    update = CompiledUpdate.__new__(CompiledUpdate)
    update.params, update.state = group.params, group.state
    update.beta1, update.beta2, update.eps, update.weight_decay = 0.9, 0.98, 1e-6, 0.01
    update.lr = torch.tensor(lr)
    used = list(range(len(group.params))) if used is None else used
    update._adamw(used, [group.grads[i].clone() for i in used], torch.tensor(finite))


def test_its_adamw_equals_the_fused_kernel_and_skips_a_non_finite_update():
    mine, fused = _Group(0), _Group(0)
    _adamw(mine, True)
    exp_avgs, exp_avg_sqs, steps = fused.state
    torch._foreach_add_(steps, 1.0)
    torch._fused_adamw_(
        fused.params, fused.grads, exp_avgs, exp_avg_sqs, [], steps, lr=1e-2, beta1=0.9,
        beta2=0.98, weight_decay=0.01, eps=1e-6, amsgrad=False, maximize=False,
    )  # fmt: skip
    for a, b in zip(
        mine.params + mine.state[0] + mine.state[1], fused.params + exp_avgs + exp_avg_sqs
    ):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert all(float(s) == 4.0 for s in mine.state[2])

    # a parameter the loss did not reach keeps its weight, moments and step count
    partial, untouched = _Group(2), _Group(2)
    _adamw(partial, True, used=[1])
    assert torch.equal(partial.params[0], untouched.params[0])
    assert all(torch.equal(partial.state[k][0], untouched.state[k][0]) for k in range(3))
    assert not torch.equal(partial.params[1], untouched.params[1])
    assert float(partial.state[2][1]) == 4.0

    skipped, before = _Group(1), _Group(1)
    skipped.grads[0][0, 0] = float("nan")
    _adamw(skipped, False)
    for a, b in zip(
        skipped.params + [t for part in skipped.state for t in part],
        before.params + [t for part in before.state for t in part],
    ):
        assert torch.equal(a, b)


def test_where_the_update_cannot_be_compiled_the_model_is(
    data_bin, synonym_table, tmp_path, monkeypatch
):
    """fairseq's adam keeps fairseq's update: the model's forward and backward are compiled."""
    monkeypatch.setattr(CompiledUpdate, "backend", "aot_eager")
    args = list(ARGS)
    args[args.index("fused_adamw")] = "adam"
    del args[args.index("--fused-adamw-weight-decay") : args.index("--clip-norm")]
    args[args.index("--max-update") + 1] = "2"
    run = fairseq_train(data_bin, tmp_path / "adam", args)
    torch._dynamo.reset()
    out = run.stdout + run.stderr
    assert (
        "--electra-compile-scope update: the model is compiled instead (fairseq's update: an "
        "optimizer other than --optimizer fused_adamw" in out
    )
    assert "compiled as one graph" not in out


def test_its_statistics_are_summed_in_the_graph_and_a_non_finite_update_stops_the_run(
    data_bin, synonym_table, tmp_path, monkeypatch
):
    """The compiled updates add their statistics and gradient norms inside the graph (nothing
    is added outside it); a non-finite gradient there skips its step, the next log stops the
    run naming it, and the weights are those of the update before."""
    from truneg_fairseq.training import device_stats

    monkeypatch.setattr(CompiledUpdate, "backend", "aot_eager")
    run_update = CompiledUpdate.run
    poisoned = {}

    def run(self, sample, num_updates, is_dummy=False):
        if num_updates != 4:
            return run_update(self, sample, num_updates, is_dummy)
        weight = self.params[0]  # update 5: one weight is NaN for its forward only
        poisoned["before"] = [p.detach().clone() for p in self.params]
        kept = weight.detach().clone()
        with torch.no_grad():
            weight.fill_(float("nan"))
        try:
            return run_update(self, sample, num_updates, is_dummy)
        finally:
            with torch.no_grad():
                weight.copy_(kept)
            poisoned["after"] = [p.detach().clone() for p in self.params]

    monkeypatch.setattr(CompiledUpdate, "run", run)
    add = device_stats.PendingStats.add
    outside = []

    def counting_add(self, logging_outputs, grad_norm, update, finite=None, summed=None):
        add(self, logging_outputs, grad_norm, update, finite, summed)
        # what was added outside the graph this interval (updates 4-6 all ran compiled)
        outside.append((update, summed is not None, len(self.vectors), self.gnorm is not None))

    monkeypatch.setattr(device_stats.PendingStats, "add", counting_add)
    args = [*ARGS]
    args[args.index("--log-interval") + 1] = "3"
    run_ = fairseq_train(data_bin, tmp_path / "run", args, check=False)
    torch._dynamo.reset()
    out = run_.stdout + run_.stderr
    assert run_.returncode != 0, out[-3000:]
    assert "gradients are Nan/Inf: 1 of the last 3 updates, the first at update 5" in out
    # update 1 ran eager (it makes the optimizer state); 2-6 compiled, their statistics and
    # norms summed in the graph: the interval of updates 4-6 added nothing outside it
    assert [u for u, *_ in outside] == [1, 2, 3, 4, 5, 6]
    assert [summed for _, summed, _, _ in outside] == [False] + [True] * 5
    assert all(vectors == 0 and not norms for _, _, vectors, norms in outside[3:])
    # update 5 skipped its step: its weights are those of update 4
    for before, after in zip(poisoned["before"], poisoned["after"]):
        assert torch.equal(before, after)


def test_the_cuda_graph_check_sees_what_would_record_a_graph_per_batch():
    """The check the compiled graphs pass (tests/step_checks.py) flags an integer input, as a batch's
    token count would be once dynamo made it symbolic, and an input written in place that is
    not a static address; the same function without them passes."""

    def step(x, n, acc):
        acc.add_(x.sum())
        return x * n

    graphs = []
    compiled = torch.compile(step, backend=recording_aot_eager(graphs), dynamic=True)
    torch._dynamo.reset()
    compiled(torch.ones(3), 2, torch.zeros(()))
    refusals = cuda_graph_refusals(graphs)
    assert any(r.startswith("integer inputs") for r in refusals), refusals
    assert any("mutated inputs not static" in r for r in refusals), refusals

    graphs.clear()
    torch._dynamo.reset()
    acc = torch.zeros(())
    torch._dynamo.mark_static_address(acc)
    torch.compile(lambda x, acc: step(x, 2, acc), backend=recording_aot_eager(graphs))(
        torch.ones(3), acc
    )
    torch._dynamo.reset()
    assert graphs and cuda_graph_refusals(graphs) == []
