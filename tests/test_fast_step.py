"""The fast-step pieces: the fused AdamW optimizer, foreach gradient clipping, bf16 autocast
through the ELECTRA task, and the compiled encoder stacks."""

import importlib.util
import re

import pytest
import torch
from fairseq import utils as fs_utils
from fairseq.optim.adam import FairseqAdam, FairseqAdamConfig
from utils import TINY_ELECTRA, build_components, fairseq_train, valid_batch

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


def test_bf16_autocast_runs_the_forward_in_bf16(data_bin):
    task, model, crit = build_components(
        data_bin,
        ["--criterion", "electra", "--electra-bf16-autocast"],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    seen = []
    hook = model.discriminator.layers[0].fc1.register_forward_hook(
        lambda m, i, o: seen.append(o.dtype)
    )
    opt = FusedAdamW(FusedAdamWConfig(lr=[1e-3]), list(model.parameters()))
    loss, sample_size, log = task.train_step(valid_batch(task), model, crit, opt, 0)
    hook.remove()
    assert seen == [torch.bfloat16]
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert any(
        p.grad is not None and p.grad.abs().sum() > 0 for p in model.discriminator.parameters()
    )


def updates(log):
    return max(int(m) for m in re.findall(r"num_updates[= ](\d+)", log))


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
    from utils import REPO

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_benchmark_skips_cleanly_without_a_gpu_and_counts_flops(monkeypatch):
    import subprocess
    import sys

    from utils import REPO

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
