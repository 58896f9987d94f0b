"""bf16 mixed precision for every task: fp32 weights and optimizer, each forward pass and loss
under ``torch.autocast(bfloat16)``, the backward and the update in fp32, no loss scaler (bf16 has
fp32's exponent range, so gradients do not underflow the way fp16 ones do).

A task runs its steps this way when :data:`AUTOCAST_ATTR` is true on it: ``fairseq-train --bf16``
sets it through the plugin's mend of fairseq's trainer (``truneg_fairseq/compat/bf16_autocast.py``),
and ``--task electra --electra-bf16-autocast`` sets it itself. fairseq's ``FairseqTask.train_step`` and
``valid_step``, which every task here inherits (``masked_lm``, ``sentence_prediction``,
``electra``, ``cline``, ``squad``), call the criterion through :func:`autocast_criterion`.
"""

import torch

AUTOCAST_ATTR = "truneg_bf16_autocast"


class Bf16Autocast:
    """Calls a criterion with its forward pass under bf16 autocast on the model's device.

    It wraps the criterion itself, inside fairseq's ``torch.cuda.amp.autocast(enabled=False)``
    (``--amp`` off) around the call, so that context cannot switch it off."""

    def __init__(self, criterion):
        self.criterion = criterion

    def __call__(self, model, sample, *args, **kwargs):
        param = next(model.parameters(), None)
        device = param.device.type if param is not None else "cpu"
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            return self.criterion(model, sample, *args, **kwargs)


def autocast_criterion(task, criterion):
    """``criterion`` under bf16 autocast when ``task`` runs in bf16, ``criterion`` otherwise."""
    return Bf16Autocast(criterion) if getattr(task, AUTOCAST_ATTR, False) else criterion
