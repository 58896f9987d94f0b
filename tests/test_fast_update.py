"""The update that does not wait for the device (truneg_fairseq/training/fast_update.py): a
non-finite gradient skips its optimizer step on the device and stops the run at the next log;
the configurations it does not cover keep fairseq's update and say why. (The same log, weights
and no sync inside an update: tests/test_device_stats.py.)"""

import torch
from fairseq_runs import TINY_ELECTRA, fairseq_train

from truneg_fairseq.optim.fused_adamw import FusedAdamW, FusedAdamWConfig

ELECTRA = [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra"]


def _optimizer(params):
    cfg = FusedAdamWConfig(fused_adamw_weight_decay=0.01, lr=[1e-2])
    return FusedAdamW(cfg, params)


def test_a_found_inf_update_changes_nothing_and_a_finite_one_is_adamw():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(3))]
    twin = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt, ref = _optimizer(params), torch.optim.AdamW(twin, lr=1e-2, weight_decay=0.01)

    def grads(seed):
        g = torch.Generator().manual_seed(seed)
        for p, q in zip(params, twin):
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()

    grads(1)
    opt.step(found_inf=torch.tensor(0.0))
    ref.step()
    before = [p.detach().clone() for p in params]
    state = {k: v.clone() for k, v in opt._optimizer.state[params[0]].items()}

    grads(2)
    opt.step(found_inf=torch.tensor(1.0))  # skipped: nothing moves, the step count included
    for p, b in zip(params, before):
        assert torch.equal(p.detach(), b)
    for key, value in opt._optimizer.state[params[0]].items():
        assert torch.equal(value, state[key]), key

    grads(3)
    opt.step(found_inf=torch.tensor(0.0))
    ref.step()  # torch's AdamW saw updates 1 and 3 only
    for p, q in zip(params, twin):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7)
    assert float(opt._optimizer.state[params[0]]["step"]) == 2.0


def test_a_non_finite_gradient_stops_the_run_at_the_next_log(
    data_bin, synonym_table, tmp_path, monkeypatch
):
    clip = FusedAdamW.clip_grad_norm
    calls = []

    def poisoned(self, max_norm, aggregate_norm_fn=None):
        calls.append(1)
        if len(calls) == 2:  # update 2: one gradient becomes NaN
            next(p for p in self.params if p.grad is not None).grad.fill_(float("nan"))
        return clip(self, max_norm, aggregate_norm_fn)

    monkeypatch.setattr(FusedAdamW, "clip_grad_norm", poisoned)
    args = [*ELECTRA, "--optimizer", "fused_adamw", "--max-update", "6", "--log-interval", "3"]
    args += ["--disable-validation", "--synonym-table", "synonyms.npz", "--clip-norm", "1.0"]
    run = fairseq_train(data_bin, tmp_path / "run", args, check=False)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-2000:]
    assert "gradients are Nan/Inf: 1 of the last 3 updates, the first at update 2" in out
    assert len(calls) == 3  # it stopped at the log of update 3, not later


def test_fairseqs_update_where_the_fast_one_does_not_apply(data_bin, synonym_table, tmp_path):
    args = [*ELECTRA, "--max-update", "1", "--disable-validation"]
    args += ["--synonym-table", "synonyms.npz"]  # the default optimizer here: fairseq's adam
    run = fairseq_train(data_bin, tmp_path / "run", args)
    assert "training updates: fairseq's (an optimizer other than --optimizer fused_adamw" in (
        run.stdout + run.stderr
    )


def test_the_sync_debug_setting_is_checked(data_bin, synonym_table, tmp_path, monkeypatch):
    """``TRUNEG_SYNC_DEBUG`` (torch's sync debug mode inside each update, on a GPU): a value
    other than warn or error is one clear error; a valid one is said in the log (on the CPU it
    changes nothing else)."""
    args = [*ELECTRA, "--optimizer", "fused_adamw", "--max-update", "1", "--disable-validation"]
    args += ["--synonym-table", "synonyms.npz"]
    monkeypatch.setenv("TRUNEG_SYNC_DEBUG", "loud")
    run = fairseq_train(data_bin, tmp_path / "bad", args, check=False)
    assert run.returncode == 1
    assert "TRUNEG_SYNC_DEBUG='loud': set it to warn or error" in run.stderr
    assert "Traceback" not in run.stderr
    monkeypatch.setenv("TRUNEG_SYNC_DEBUG", "error")
    run = fairseq_train(data_bin, tmp_path / "good", args)
    assert "TRUNEG_SYNC_DEBUG=error: a wait for the device inside an update errors" in run.stdout
    # the default dynamic slots: the one wait left, said once
    assert run.stdout.count("--mlm-prediction-slots dynamic still waits for the device") == 1
