"""``--amp`` updates by the gradient, not the gradient divided by the loss scale
(``amp_unscales_once``): fairseq 0.12's ``AMPOptimizer.clip_grad_norm`` unscales the gradients
through the inner torch optimizer (``scaler.unscale_(self.optimizer)``) and ``step`` then hands
a different object, the fairseq optimizer around it (``scaler.step(self.fp32_optimizer)``), to
the ``GradScaler``, which keeps its "already unscaled" state per object and so divides the same
gradients by the scale a second time: every update is 1/scale of what it should be (1/128 at
fairseq's initial scale, smaller as the scale grows), for every optimizer. The shim unscales
through the object that ``step`` passes, so the scaler unscales once, reuses the overflow check
of that unscale (an overflowing step is skipped and the scale backs off) and ``step`` (with
anything an optimizer does in it) is fairseq's own. It is installed only when a one-parameter
probe of the installed ``AMPOptimizer`` shows the short update, so a fairseq that has fixed it
is left alone.

Upstream: fairseq 0.12.2 ``fairseq/optim/amp_optimizer.py`` (the scaler unscales through the inner
optimizer, then steps through the outer one); no issue filed that we know of.
"""

from __future__ import annotations

import logging
import warnings

import torch

from .wrapping import wrap_once


def _amp_update_is_short() -> bool:
    """Whether the installed fairseq's ``AMPOptimizer`` divides the update by the loss scale
    (see the module docstring): one parameter, SGD with learning rate 1, gradient 1, a CPU
    ``GradScaler`` at scale 4, the trainer's calls (``backward``, ``clip_grad_norm``, ``step``).
    The parameter should move by 1; fairseq 0.12 moves it by 1/4. Anything that stops the probe
    (an ``AMPOptimizer`` built differently) counts as fixed: the shim is for the code it knows."""
    from omegaconf import OmegaConf

    try:
        from fairseq.optim.amp_optimizer import AMPOptimizer

        cfg = OmegaConf.create(
            {
                "optimizer": {"_name": "sgd", "lr": [1.0], "momentum": 0.0, "weight_decay": 0.0},
                "common": {
                    "fp16_init_scale": 4,
                    "amp_init_scale": 4,
                    "amp_scale_window": None,
                    "min_loss_scale": 1e-4,
                },
            }
        )
        param = torch.nn.Parameter(torch.zeros(1))
        with (
            warnings.catch_warnings()
        ):  # fairseq builds torch.cuda.amp.GradScaler (deprecated; no CUDA here)
            warnings.simplefilter("ignore")
            amp = AMPOptimizer.build_optimizer(cfg, [param])
            amp._grad_scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
            amp.backward(param.sum())
            amp.clip_grad_norm(0.0)
            amp.step()
        moved = -float(param.detach()[0])
    except Exception:
        return False
    return abs(moved - 0.25) < 1e-6


def amp_unscales_once() -> None:
    """Unscale ``--amp`` gradients once (see the module docstring): ``clip_grad_norm``
    unscales through the fairseq optimizer that ``step`` hands to the ``GradScaler``."""
    from fairseq.optim.amp_optimizer import AMPOptimizer

    def unscale_once(original):
        if not _amp_update_is_short():  # a fairseq that has fixed it is left alone
            return None
        log = logging.getLogger("fairseq.optim.amp_optimizer")

        def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
            # the scaler remembers per object that it has unscaled (and whether it found
            # inf/nan): unscaling through the object step() passes makes step() apply these
            # gradients as they are
            self.scaler.unscale_(self.fp32_optimizer)
            grad_norm = self.fp32_optimizer.clip_grad_norm(max_norm, aggregate_norm_fn)
            if not torch.isfinite(
                grad_norm
            ).all():  # step() skips the update, update() backs off the scale
                next_scale = self.next_loss_scale
                if next_scale <= self.min_loss_scale:
                    raise FloatingPointError(
                        f"AMP: the loss scale would fall to {next_scale}, at or below "
                        f"--min-loss-scale {self.min_loss_scale}: the loss is probably diverging. "
                        "Restart from an earlier checkpoint (a lower --lr or a longer warm-up) or "
                        "train in fp32"
                    )
                log.info(
                    "AMP: gradients overflowed; skipping the update, loss scale goes to %s",
                    next_scale,
                )
            return grad_norm

        clip_grad_norm.__doc__ = original.__doc__
        return clip_grad_norm

    wrap_once(AMPOptimizer, "clip_grad_norm", unscale_once, marker="truneg_unscale_once")
