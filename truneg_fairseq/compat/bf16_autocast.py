"""``--bf16`` means bf16 autocast with fp32 weights (``bf16_means_autocast``): fairseq 0.12's
``--bf16`` is its TPU mode (``options.parse_args_and_arch`` turns on ``--tpu``, and the trainer
then asks torch_xla for its device and fails on a GPU or CPU), and its non-TPU bf16 casts the
model's weights to bf16. What a user of ``--bf16`` on a GPU means is what
:mod:`truneg_fairseq.precision` does: fp32 weights and optimizer, the forward pass and loss
under ``torch.autocast(bfloat16)``, no loss scaler. Without torch_xla installed the shim undoes
the implied ``--tpu`` when fairseq converts its arguments (before any worker starts), and when
fairseq builds its ``Trainer`` with ``common.bf16`` and no TPU it sets ``common.bf16`` (and
``memory_efficient_bf16``) to false, so the trainer keeps fp32 weights, fp32 batches and a
plain fp32 optimizer, and marks the task to autocast. fairseq's ``FairseqTask.train_step`` and
``valid_step`` (the steps of ``masked_lm``, ``sentence_prediction`` and the plugin's tasks)
call the criterion under bf16 autocast on a task so marked. ``--bf16`` with ``--fp16`` or
``--amp`` is refused with one error. The saved config records ``bf16: false``: weights in the
checkpoint are fp32 and load as any fp32 checkpoint; a resumed run is bf16 when ``--bf16`` is
given again.

Upstream: fairseq issue #4696 (``--bf16`` without ``--tpu`` asks torch_xla for its device); open.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging

from truneg_fairseq.errors import (
    PrecisionFlagError,  # noqa: F401  (defined in the one place of the errors)
)

from .wrapping import rebind_conversion, wrap_once

_MARKER = "truneg_bf16"  # the marker of the wrappers this mend installs


def _xla_installed() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def bf16_means_autocast() -> None:
    """``--bf16``: fp32 weights, bf16 autocast, no loss scaler (see the module docstring)."""
    from fairseq import checkpoint_utils  # noqa: F401  (imported, so that it is in sys.modules)
    from fairseq.dataclass import utils as dataclass_utils
    from fairseq.tasks import FairseqTask
    from fairseq.trainer import Trainer
    from omegaconf import DictConfig, open_dict

    from ..precision import AUTOCAST_ATTR, autocast_criterion

    log = logging.getLogger("truneg_fairseq.precision")

    def undo_implied_tpu(convert):
        @functools.wraps(convert)
        def convert_namespace_to_omegaconf(args):
            if (
                getattr(args, "bf16", False)
                and getattr(args, "tpu", False)
                and not _xla_installed()
            ):
                args.tpu = False  # fairseq's "--bf16 implies --tpu": there is no TPU runtime here
            return convert(args)

        convert_namespace_to_omegaconf.truneg_quiet = getattr(convert, "truneg_quiet", False)
        return convert_namespace_to_omegaconf

    convert = dataclass_utils.convert_namespace_to_omegaconf
    if wrap_once(
        dataclass_utils, "convert_namespace_to_omegaconf", undo_implied_tpu, marker=_MARKER
    ):
        rebind_conversion(convert, dataclass_utils.convert_namespace_to_omegaconf)

    def fp32_weights(init):
        @functools.wraps(init)
        def __init__(self, cfg, task, model, criterion, *args, **kwargs):
            if isinstance(cfg, argparse.Namespace):
                cfg = dataclass_utils.convert_namespace_to_omegaconf(cfg)
            common = cfg.common if isinstance(cfg, DictConfig) else None
            if common is not None and common.get("bf16", False) and not common.get("tpu", False):
                other = [f"--{f}" for f in ("fp16", "amp") if common.get(f, False)]
                if other:
                    raise PrecisionFlagError(
                        f"--bf16 and {' and '.join(other)} are two mixed-precision modes: give "
                        "one of them (--bf16 on GPUs with bf16, A100/H100 and later; --fp16 on "
                        "V100/T4)"
                    )
                with open_dict(common):
                    common.bf16 = False  # fp32 weights, batches and optimizer in fairseq's trainer
                    common.memory_efficient_bf16 = False
                setattr(task, AUTOCAST_ATTR, True)
                log.info(
                    "--bf16: fp32 weights and optimizer, forward pass and loss under "
                    "torch.autocast(bfloat16), no loss scaler"
                )
            init(self, cfg, task, model, criterion, *args, **kwargs)

        return __init__

    wrap_once(Trainer, "__init__", fp32_weights, marker=_MARKER)

    def autocast_train_step(train_step):
        @functools.wraps(train_step)
        def task_train_step(
            self, sample, model, criterion, optimizer, update_num, ignore_grad=False
        ):
            # only the forward pass and loss run under autocast; fairseq's step does the backward
            return train_step(
                self,
                sample,
                model,
                autocast_criterion(self, criterion),
                optimizer,
                update_num,
                ignore_grad,
            )

        return task_train_step

    def autocast_valid_step(valid_step):
        @functools.wraps(valid_step)
        def task_valid_step(self, sample, model, criterion):
            return valid_step(self, sample, model, autocast_criterion(self, criterion))

        return task_valid_step

    # the two steps are replaced together, each with the marker
    if wrap_once(FairseqTask, "train_step", autocast_train_step, marker=_MARKER):
        wrap_once(FairseqTask, "valid_step", autocast_valid_step, marker=_MARKER)
