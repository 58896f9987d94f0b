"""The fast-step pieces: the fused AdamW optimizer, foreach gradient clipping, bf16 autocast
through the ELECTRA task, and the compiled encoder stacks."""

import importlib.util
import re

import pytest
import torch
from fairseq import utils as fs_utils
from fairseq.optim.adam import FairseqAdam, FairseqAdamConfig
from fairseq_runs import TINY_ELECTRA, build_components, fairseq_train, updates, valid_batch
from step_checks import cuda_graph_refusals, recording_aot_eager

from truneg_fairseq.optim.fused_adamw import FusedAdamW, FusedAdamWConfig


def tiny_params(seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    return net


def grads_for(net, step):
    torch.manual_seed(100 + step)
    x = torch.randn(5, 8)
    net.zero_grad()
    (net(x) ** 2).sum().backward()


def test_fused_adamw_matches_fairseq_adam():
    """Same update as fairseq's adam (decoupled weight decay); only epsilon sits at another place
    (after the bias correction in PyTorch, before it in fairseq), so compare with a tiny one."""
    a, b = tiny_params(0), tiny_params(0)
    ref = FairseqAdam(
        FairseqAdamConfig(
            adam_betas="(0.9, 0.98)", adam_eps=1e-12, weight_decay=0.01, lr=[1e-2], tpu=False
        ),
        list(a.parameters()),
    )
    ours = FusedAdamW(
        FusedAdamWConfig(
            fused_adamw_betas="(0.9, 0.98)",
            fused_adamw_eps=1e-12,
            fused_adamw_weight_decay=0.01,
            lr=[1e-2],
        ),
        list(b.parameters()),
    )
    assert type(ours).__name__ == "FusedAdamW"
    for step in range(4):
        grads_for(a, step)
        grads_for(b, step)
        ref.step()
        ours.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pb, pa, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("max_norm", [0.0, 0.5, 1e6])
def test_clip_grad_norm_matches_fairseq(max_norm):
    a, b = tiny_params(1), tiny_params(1)
    grads_for(a, 0)
    grads_for(b, 0)
    ours = FusedAdamW(FusedAdamWConfig(lr=[1e-3]), list(b.parameters()))
    ref_norm = fs_utils.clip_grad_norm_(list(a.parameters()), max_norm)
    our_norm = ours.clip_grad_norm(max_norm)
    torch.testing.assert_close(our_norm, ref_norm)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pb.grad, pa.grad)


def test_bf16_autocast_refuses_fp16(data_bin):
    with pytest.raises(
        ValueError, match="--electra-bf16-autocast is a mixed-precision mode of its own"
    ):
        build_components(
            data_bin,
            ["--criterion", "electra", "--electra-bf16-autocast", "--amp"],
            arch_args=TINY_ELECTRA,
            task="electra",
        )


def test_bf16_autocast_follows_the_device_and_runs_the_forward_in_bf16(data_bin, caplog):
    """--electra-bf16-autocast (set by the ELECTRA configs) on a CPU run: off, said in the log,
    the step in fp32; the autocast it turns on for a GPU run (the task's mark) runs the forward
    in bf16 with fp32 weights, loss and gradients."""
    from truneg_fairseq.precision import AUTOCAST_ATTR

    with caplog.at_level("INFO"):
        task, model, crit = build_components(
            data_bin,
            ["--criterion", "electra", "--electra-bf16-autocast", "--cpu"],
            arch_args=TINY_ELECTRA,
            task="electra",
        )
    assert not getattr(task, AUTOCAST_ATTR, False)
    assert "this run is on the CPU" in caplog.text and "without autocast" in caplog.text
    seen = []
    hook = model.discriminator.layers[0].fc1.register_forward_hook(
        lambda m, i, o: seen.append(o.dtype)
    )
    opt = FusedAdamW(FusedAdamWConfig(lr=[1e-3]), list(model.parameters()))
    task.train_step(valid_batch(task), model, crit, opt, 0)
    assert seen == [torch.float32]
    setattr(task, AUTOCAST_ATTR, True)  # as on a GPU
    seen.clear()
    loss, sample_size, log = task.train_step(valid_batch(task), model, crit, opt, 0)
    hook.remove()
    assert seen == [torch.bfloat16]
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert any(
        p.grad is not None and p.grad.abs().sum() > 0 for p in model.discriminator.parameters()
    )


@pytest.mark.slow
def test_fast_flags_train_and_resume_under_fairseq_train(data_bin, synonym_table, tmp_path):
    fast = [
        *TINY_ELECTRA,
        "--task",
        "electra",
        "--criterion",
        "mlm_soft_reg",
        "--synonym-table",
        "synonyms.npz",
        "--electra-bf16-autocast",
        "--optimizer",
        "fused_adamw",
        "--fused-adamw-betas",
        "(0.9, 0.999)",
        "--fused-adamw-eps",
        "1e-6",
        "--fused-adamw-weight-decay",
        "0.01",
        "--clip-norm",
        "1.0",
        "--mlm-prediction-slots",
        "static",
    ]
    save = tmp_path / "ckpt"
    out = fairseq_train(data_bin, save, [*fast, "--max-update", "3"])
    assert updates(out.stdout + out.stderr) == 3
    assert (
        re.search(r"slots_dropped", out.stdout + out.stderr) is None
        or "slots_dropped 0" in out.stdout
    )
    again = fairseq_train(data_bin, save, [*fast, "--max-update", "5"])
    log = again.stdout + again.stderr
    assert "Loaded checkpoint" in log and "@ 3 updates" in log and updates(log) == 5


@pytest.mark.slow
def test_compiled_encoders_equal_eager(data_bin):
    task, model, crit = build_components(
        data_bin,
        [
            "--criterion",
            "electra",
            "--mlm-prediction-slots",
            "static",
            "--electra-sample-temperature",
            "1e-6",
        ],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    model.eval()
    sample = valid_batch(task)
    eager, _, log_e = crit(model, sample)
    model.compile_encoders()
    compiled, _, log_c = crit(model, sample)
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
    assert int(log_c["disc_correct"]) == int(log_e["disc_correct"])
    assert "_orig_mod" not in "".join(model.state_dict())  # checkpoints keep their keys


def load_benchmark(name: str):
    """The module of ``benchmarks/NAME.py``, loaded from its file (the benchmarks are scripts,
    not modules of the package)."""
    from repo_paths import REPO

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_benchmark_skips_cleanly_without_a_gpu_and_counts_flops(monkeypatch):
    import subprocess
    import sys

    from repo_paths import REPO

    # gpu_step imports its neighbours by name, as it does when run as a script
    for neighbour in ("_common", "gpu_sizes", "gpu_setup"):
        monkeypatch.setitem(sys.modules, neighbour, load_benchmark(neighbour))
    gpu_step = load_benchmark("gpu_step")

    # ELECTRA-small at 128 x 128: ~1.15 TFLOP per step, base at 32 x 512: ~11 TFLOP
    assert abs(gpu_step.step_flops("small") / 1e12 - 1.15) < 0.02
    assert 10.0 < gpu_step.step_flops("base") / 1e12 < 12.0
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would measure instead of skipping")
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_step.py")], capture_output=True, text=True
    )
    assert out.returncode == 0 and "no CUDA GPU here" in out.stdout


FULLGRAPH = {
    "electra": ("electra", TINY_ELECTRA, []),
    "electra_hc": ("electra", TINY_ELECTRA, ["--criterion", "mlm_hard_correction"]),
    "electra_sr": ("electra", TINY_ELECTRA, ["--criterion", "mlm_soft_reg"]),
    "electra_kl": ("electra", TINY_ELECTRA, ["--criterion", "mlm_sent_kl"]),
}
# (fairseq's own RoBERTa encoder branches on ``padding_mask.any()``: a graph break of fairseq's)


def test_a_choice_of_the_config_is_a_plain_string_the_traced_step_branches_on():
    """fairseq's choice fields are Enum members equal to their strings; dynamo in some PyTorch
    releases (2.11) compares them with a string as unequal, so a compiled step read
    ``--mlm-prediction-slots static`` as dynamic. The step's config holds the string."""
    from omegaconf import OmegaConf

    from truneg_fairseq.criterions.cfn_base import SynonymCriterionConfig
    from truneg_fairseq.models.step_config import plain_config

    node = OmegaConf.structured(SynonymCriterionConfig(mlm_prediction_slots="static"))
    assert not isinstance(node.mlm_prediction_slots, str)  # fairseq's Enum member
    cfg = plain_config(node)
    assert type(cfg.mlm_prediction_slots) is str and cfg.mlm_prediction_slots == "static"

    def step(x):
        return x + 1 if cfg.mlm_prediction_slots == "static" else x - 1

    torch._dynamo.reset()
    assert torch.compile(step, fullgraph=True, backend="eager")(torch.zeros(1)).item() == 1.0


@pytest.mark.parametrize("name", sorted(FULLGRAPH))
def test_forward_and_backward_trace_as_one_graph(name, data_bin, synonym_table):
    """The config is read at build time (models/step_config.py): dynamo traces the criterion's
    forward and the backward as one graph (fullgraph=True, aot_eager: no code generated), and
    the compiled step gives eager's loss and gradients."""
    task_name, arch, extra = FULLGRAPH[name]
    args = ["--criterion", "electra", *extra, "--mlm-prediction-slots", "static"]
    args += ["--synonym-table", str(synonym_table), "--electra-sample-temperature", "1e-6"]
    task, model, crit = build_components(data_bin, args, arch_args=arch, task=task_name)
    sample = valid_batch(task, n=4)

    def step(sample):
        loss, _, log = crit(model, sample)
        loss.backward()
        return loss.detach(), log["sample_size"]

    def grads():
        out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        return out

    torch._dynamo.reset()
    torch.manual_seed(0)
    eager, n_eager = step(sample)
    g_eager = grads()
    graphs = []
    compiled = torch.compile(step, fullgraph=True, backend=recording_aot_eager(graphs))
    torch.manual_seed(0)
    with torch._dynamo.config.patch(trace_autograd_ops=True):  # backward in the same graph
        loss, n = compiled(sample)
    g = grads()
    torch._dynamo.reset()
    torch.testing.assert_close(loss, eager, rtol=1e-4, atol=1e-5)
    assert int(n) == int(n_eager)
    assert g.keys() == g_eager.keys() and len(g) > 10
    for key in g:
        torch.testing.assert_close(g[key], g_eager[key], rtol=1e-3, atol=1e-5, msg=key)
    # nothing in the step that CUDA graphs refuse (each would also be a wait for the device)
    assert graphs and cuda_graph_refusals(graphs) == []


def test_step_counts_benchmark_finds_no_sync_in_an_electra_update(monkeypatch):
    """benchmarks/step_counts.py on ELECTRA-small's structure (2 layers), through fairseq's
    ``Trainer.train_step`` with the recipes' flags, and RoBERTa-base's: the update asks the device
    for nothing (training/fast_update.py, the batch-first encoders), and the Trainer around the step
    stays lean."""
    import sys

    for neighbour in ("_common", "gpu_sizes", "gpu_setup", "gpu_step"):
        monkeypatch.setitem(sys.modules, neighbour, load_benchmark(neighbour))
    step_counts = load_benchmark("step_counts")
    rows = step_counts.main(["--only", "electra_hc,roberta_hc", "--no-graphs", "--layers", "2"])
    for name, row in rows.items():
        assert row["kernels"] > 200 and row["python_calls"] > row["python_calls_trainer"] > 0
        assert row["syncs"] == 0, (name, row["sync_sites"])
        assert row["python_calls_trainer"] <= 1500, (name, row)
    # attention counted as one fused kernel a pass: fewer operators, the same update otherwise
    fused = step_counts.main(
        ["--only", "electra_hc", "--no-graphs", "--layers", "2", "--fused-attention"]
    )["electra_hc"]
    assert fused["syncs"] == 0 and fused["kernels"] < rows["electra_hc"]["kernels"]

    # the recipes' --bf16: the linear layers run on bf16 copies of their weights
    # (training/bf16_weights.py), without autocast's two casts a weight and bias
    from truneg_fairseq.training.fast_update import FastUpdate

    counted = {}
    for copies in (True, False):
        monkeypatch.setattr(FastUpdate, "compute_copies", copies)
        counted[copies] = step_counts.main(
            ["--only", "electra_hc", "--no-graphs", "--layers", "2", "--fused-attention", "--bf16"]
        )["electra_hc"]
    on, off = counted[True], counted[False]
    assert on["syncs"] == 0 and off["syncs"] == 0
    assert on["ops"]["_to_copy"] < off["ops"]["_to_copy"] / 2, (on["ops"], off["ops"])
    assert on["kernels"] <= off["kernels"] - 60


@pytest.mark.slow
def test_step_counts_benchmark_counts_the_compiled_update(monkeypatch):
    """``step_counts.py --compiled`` (the recipes' COMPILE=update), traced with aot_eager here
    (inductor's CPU code takes minutes): ELECTRA's and RoBERTa's updates are one graph each,
    and the host's Python calls an update are counted."""
    import sys

    from truneg_fairseq.training.compiled_update import CompiledUpdate

    for neighbour in ("_common", "gpu_sizes", "gpu_setup", "gpu_step"):
        monkeypatch.setitem(sys.modules, neighbour, load_benchmark(neighbour))
    monkeypatch.setattr(CompiledUpdate, "backend", "aot_eager")
    step_counts = load_benchmark("step_counts")
    rows = step_counts.main(
        ["--only", "electra_hc,roberta_hc", "--no-graphs", "--layers", "2", "--compiled"]
    )
    for name, row in rows.items():
        assert row["graphs"] == 1 and row["python_calls"] > 0, (name, row)
        assert row["kernels"] == "-" and row["compile_s"] > 0


def test_fused_adamw_direct_step_equals_torch_adamw_and_resumes():
    """The direct fused call gives torch.optim.AdamW's update (one parameter without a
    gradient at some steps), its state loads in a new optimizer and goes on the same, and
    fairseq's per-parameter helpers (multiply, zero) do what fairseq's do."""
    cfg = FusedAdamWConfig(
        fused_adamw_betas="(0.9, 0.98)",
        fused_adamw_eps=1e-6,
        fused_adamw_weight_decay=0.01,
        lr=[1e-2],
    )
    a, b = tiny_params(2), tiny_params(2)
    ref = torch.optim.AdamW(
        a.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01, foreach=True
    )
    ours = FusedAdamW(cfg, list(b.parameters()))

    def update(step, opt, net, frozen):
        grads_for(net, step)
        if frozen:
            net[2].bias.grad = None
        opt.step()

    for step in range(6):
        update(step, ref, a, step in (1, 2))
        b.zero_grad()
        grads_for(b, step)
        ours.multiply_grads(torch.tensor(2.0))  # fairseq's helper, then undone
        ours.multiply_grads(0.5)
        if step in (1, 2):
            b[2].bias.grad = None
        ours.step()
        if step == 3:  # a checkpoint: a new optimizer from the saved state
            state = ours.state_dict()
            ours = FusedAdamW(cfg, list(b.parameters()))
            ours.load_state_dict(state)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pb, pa, rtol=1e-6, atol=1e-7)
    assert int(ours.optimizer.state[b[2].bias]["step"]) == 4  # skipped at two steps
    ours.zero_grad()
    assert all(p.grad is None for p in b.parameters())
