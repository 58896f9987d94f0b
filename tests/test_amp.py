"""``--amp``: fairseq's ``AMPOptimizer`` must apply the gradient itself, not the gradient divided
by the loss scale. Each test drives the real ``AMPOptimizer`` (with a CPU ``GradScaler`` in place
of the CUDA one fairseq builds) through the calls fairseq's trainer makes -- ``backward`` of the
loss (which multiplies it by the scale), ``multiply_grads(1 / sample_size)``, ``clip_grad_norm``,
``step`` -- and compares every update with the same fairseq optimizer in fp32 given the same
parameters and gradients."""

import warnings

import pytest
import torch
from fairseq import optim
from fairseq.optim.amp_optimizer import AMPOptimizer
from omegaconf import OmegaConf

import truneg_fairseq  # noqa: F401  (installs the plugin's mends of fairseq)
from truneg_fairseq import compat

OPTIMIZERS = {
    "sgd": {"_name": "sgd", "lr": [0.5], "momentum": 0.0, "weight_decay": 0.0},
    "adam": {
        "_name": "adam",
        "lr": [0.5],
        "adam_betas": "(0.9, 0.98)",
        "adam_eps": 1e-6,
        "weight_decay": 0.01,
        "use_old_adam": False,
        "fp16_adam_stats": False,
        "tpu": False,
    },
    "fused_adamw": {
        "_name": "fused_adamw",
        "lr": [0.5],
        "fused_adamw_betas": "(0.9, 0.98)",
        "fused_adamw_eps": 1e-6,
        "fused_adamw_weight_decay": 0.01,
    },
}
SAMPLE_SIZE = 4.0  # the trainer divides the summed gradients by the sample size


def make_params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.nn.Parameter(torch.randn(5, 3, generator=g)),
        torch.nn.Parameter(torch.randn(3, generator=g)),
    ]


def gradients(step, seed=1):
    """Per-step gradients of mixed magnitudes (so Adam's epsilon makes a short update visible),
    exact in binary so that scaling by a power of two and back loses nothing."""
    g = torch.Generator().manual_seed(seed + step)
    out = []
    for shape in ((5, 3), (3,)):
        mag = 2.0 ** torch.randint(-14, 2, shape, generator=g).float()
        sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)
        out.append(sign * mag)
    return out


def build_amp(name, params, init_scale=1024.0, growth_interval=2000, min_loss_scale=1e-4):
    cfg = OmegaConf.create(
        {
            "optimizer": OPTIMIZERS[name],
            "common": {
                "fp16_init_scale": init_scale,
                "amp_init_scale": init_scale,
                "amp_scale_window": None,
                "min_loss_scale": min_loss_scale,
            },
        }
    )
    with (
        warnings.catch_warnings()
    ):  # fairseq builds torch.cuda.amp.GradScaler (deprecated; no CUDA here)
        warnings.simplefilter("ignore")
        amp = AMPOptimizer.build_optimizer(cfg, params)
    amp._grad_scaler = torch.amp.GradScaler(
        "cpu", init_scale=init_scale, growth_interval=growth_interval
    )
    return amp


def build_fp32(name, params):
    return optim.build_optimizer(OmegaConf.create(OPTIMIZERS[name]), params)


def trainer_step(opt, params, grads, amp):
    """What fairseq's trainer does for one update: zero the gradients, backward the summed loss
    (scaled by the AMP optimizer), divide by the sample size, clip (max norm 0: measure only),
    step. The loss is sum(p * g) * sample_size, so the gradient after the division is g."""
    opt.zero_grad()
    loss = sum((p * g).sum() for p, g in zip(params, grads)) * SAMPLE_SIZE
    opt.backward(loss) if amp else loss.backward()
    opt.multiply_grads(1.0 / SAMPLE_SIZE)
    norm = opt.clip_grad_norm(0.0)
    opt.step()
    return norm


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_amp_update_equals_the_fp32_update(name):
    """Five updates with growth_interval 1 (the scale doubles after each finite step), the third
    with an infinite gradient: that step is skipped (parameters and optimizer state unchanged,
    scale halved) and every other update equals the fp32 optimizer's, before and after."""
    amp_params, ref_params = make_params(), make_params()
    amp = build_amp(name, amp_params, init_scale=1024.0, growth_interval=1)
    ref = build_fp32(name, ref_params)
    scales = []
    for step in range(5):
        grads = gradients(step)
        before = [p.detach().clone() for p in amp_params]
        scale = amp.scaler.get_scale()
        if step == 2:
            grads[0] = grads[0].clone()
            grads[0][1, 2] = float("inf")
            norm = trainer_step(amp, amp_params, grads, amp=True)
            assert not torch.isfinite(norm)
            for p, b in zip(amp_params, before):
                assert torch.equal(
                    p.detach(), b
                ), "the overflowing step must leave the parameters alone"
            assert amp.scaler.get_scale() == scale / 2
        else:
            trainer_step(amp, amp_params, grads, amp=True)
            trainer_step(ref, ref_params, grads, amp=False)
            for p, r, b in zip(amp_params, ref_params, before):
                assert not torch.equal(p.detach(), b)
                torch.testing.assert_close(
                    p.detach(),
                    r.detach(),
                    rtol=1e-6,
                    atol=1e-7,
                    msg=f"{name}, step {step}, scale {scale}: AMP update differs from fp32",
                )
            assert amp.scaler.get_scale() == scale * 2
        scales.append(scale)
    assert scales == [1024.0, 2048.0, 4096.0, 2048.0, 4096.0]


def test_amp_overflow_at_the_minimum_scale_stops_training():
    """An overflow that would take the scale to --min-loss-scale or below ends training with
    fairseq's FloatingPointError (the trainer then saves crash.pt and runs its NaN detector)."""
    params = make_params()
    amp = build_amp("sgd", params, init_scale=2.0, min_loss_scale=1.0)
    grads = gradients(0)
    grads[1] = torch.full_like(grads[1], float("nan"))
    with pytest.raises(FloatingPointError, match="(?i)min(imum)?[- ]loss[- ]scale"):
        trainer_step(amp, params, grads, amp=True)


def test_the_mend_is_installed_once_and_the_probe_sees_exact_updates():
    """The probe that decides whether to mend fairseq finds the installed AMPOptimizer exact (as
    it would a fairseq that fixed it, which is then left alone); installing again changes nothing."""
    mended = AMPOptimizer.clip_grad_norm
    assert getattr(mended, "truneg_unscale_once", False)
    assert not compat._amp_update_is_short()
    compat.amp_unscales_once()
    assert AMPOptimizer.clip_grad_norm is mended
