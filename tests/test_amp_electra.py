"""``--amp`` (fp16 autocast, a ``GradScaler``, fp32 weights) on the plugin's ELECTRA: the step's
gradients stay finite at fairseq's initial loss scale. At initialisation the replaced-token-
detection gradient has one sign at most tokens, so the gradients of the discriminator's logit
projection are sums over every token of the batch; computed in fp16 they overflow (the scaler
then skips updates and drives the scale below 1). The head keeps that projection in fp32.

fairseq-train's ``--amp`` autocasts on CUDA only, so these tests run the task's own
``train_step`` under CPU fp16 autocast with the real ``AMPOptimizer`` (a CPU ``GradScaler`` in
place of the CUDA one fairseq builds), as the trainer calls it."""

import warnings

import pytest
import torch
from fairseq import optim
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq_runs import TINY_ELECTRA, build_components
from omegaconf import OmegaConf

AMP_INIT_SCALE = 2.0**7  # fairseq's --amp-init-scale default


@pytest.fixture(scope="module")
def electra(data_bin):
    task, model, criterion = build_components(
        data_bin, ["--criterion", "electra"], arch_args=TINY_ELECTRA, task="electra"
    )
    task.load_dataset("train")
    ds = task.dataset("train")
    sample = ds.collater([ds[i] for i in range(8)])  # 8 x 64 tokens
    return task, model, criterion, sample


def amp_optimizer(model, amp=True):
    """fairseq's ``AMPOptimizer`` over SGD with a CPU ``GradScaler`` (``amp=False``: the SGD)."""
    cfg = OmegaConf.create(
        {
            "optimizer": {"_name": "sgd", "lr": [0.1], "momentum": 0.0, "weight_decay": 0.0},
            "common": {
                "fp16_init_scale": AMP_INIT_SCALE,
                "amp_init_scale": AMP_INIT_SCALE,
                "amp_scale_window": None,
                "min_loss_scale": 1e-4,
            },
        }
    )
    params = [p for p in model.parameters() if p.requires_grad]
    if not amp:
        return optim.build_optimizer(cfg.optimizer, params)
    with warnings.catch_warnings():  # fairseq builds torch.cuda.amp.GradScaler (no CUDA here)
        warnings.simplefilter("ignore")
        amp = AMPOptimizer.build_optimizer(cfg, params)
    amp._grad_scaler = torch.amp.GradScaler("cpu", init_scale=AMP_INIT_SCALE)
    return amp


def gradients(task, model, criterion, sample, dtype=None):
    """The trainer's backward of one step (summed loss, scaled by the AMP optimizer when
    ``dtype`` is fp16), unscaled: {name: fp32 gradient}."""
    model.train()
    model.zero_grad()
    torch.manual_seed(0)  # the same masking-independent dropout and sampling in every run
    opt = amp_optimizer(model, amp=dtype == torch.float16)
    with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
        loss, _, _ = task.train_step(sample, model, criterion, opt, update_num=0)
    scale = opt.scaler.get_scale() if dtype == torch.float16 else 1.0
    return loss, {
        n: p.grad.float() / scale for n, p in model.named_parameters() if p.grad is not None
    }


def test_the_fp16_autocast_step_has_finite_gradients(electra):
    task, model, criterion, sample = electra
    loss, amp = gradients(task, model, criterion, sample, torch.float16)
    _, ref = gradients(task, model, criterion, sample)
    assert torch.isfinite(loss)
    # the sum that overflowed: far above fp16's 65,504 once scaled by 128
    assert float(ref["discriminator_head.out_proj.bias"].abs().max()) * AMP_INIT_SCALE > 65504
    bad = [n for n, g in amp.items() if not torch.isfinite(g).all()]
    assert bad == []
    for name in ("discriminator_head.out_proj.bias", "discriminator_head.out_proj.weight"):
        torch.testing.assert_close(
            amp[name], ref[name], rtol=2e-2, atol=1e-2 * ref[name].abs().max()
        )


def test_the_amp_step_updates_the_weights(electra):
    """The whole trainer sequence (backward, unscale, clip, step) at the initial scale: the
    scaler finds no overflow, so the update is taken and the scale kept."""
    task, model, criterion, sample = electra
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        model.train()
        opt = amp_optimizer(model)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            _, sample_size, _ = task.train_step(sample, model, criterion, opt, update_num=0)
        opt.multiply_grads(1.0 / float(sample_size))
        norm = opt.clip_grad_norm(0.0)
        before = model.discriminator_head.out_proj.bias.detach().clone()
        opt.step()
        assert torch.isfinite(norm)
        assert opt.scaler.get_scale() == AMP_INIT_SCALE
        assert not torch.equal(model.discriminator_head.out_proj.bias.detach(), before)
    finally:
        model.load_state_dict(saved)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_logits_are_fp32_under_autocast_and_unchanged_in_fp32(electra, dtype):
    _, model, _, sample = electra
    model.eval()
    tokens = sample["net_input"]["src_tokens"]
    with torch.no_grad():
        ref = model.discriminator_logits(tokens)
        with torch.autocast("cpu", dtype=dtype):
            low = model.discriminator_logits(tokens)
        head = model.discriminator_head
        features = model.discriminator_features(tokens)
        plain = head.out_proj(head.activation_fn(head.dense(features))).squeeze(-1)
    assert ref.dtype == low.dtype == torch.float32
    assert torch.equal(ref, plain)  # fp32: the same computation as before
    torch.testing.assert_close(low, ref, rtol=0.05, atol=0.05)
