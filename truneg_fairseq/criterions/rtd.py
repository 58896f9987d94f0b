"""The flags of ELECTRA's replaced-token-detection (RTD) term.

Any masked-LM criterion of the plugin adds this term when the model's class detects replaced
tokens (:class:`truneg_fairseq.models.objectives.ReplacedTokenDetection`). The model's forward
samples the replacements from the generator, builds the corrupted input and runs the
discriminator (keys ``rtd_sampled``, ``rtd_corrupted``, ``rtd_logits``); the step
(:mod:`truneg_fairseq.core.replaced_tokens`) labels every token replaced/original, sums the per-token
BCE and combines it as

    loss = electra_gen_weight * L_mlm + electra_disc_weight * mask_prob * sum_t BCE_t

Dividing by the number of masked tokens (fairseq's ``sample_size``), ``mask_prob * sum_t``
becomes (in expectation) the per-token mean BCE that ELECTRA weights by 50; it is logged as
``disc_loss`` (in the loss's unit), and the plain per-token mean as ``disc_bce``.
"""

from dataclasses import field, fields, make_dataclass
from typing import Optional

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from omegaconf import II

from truneg_fairseq.core.objectives import Param
from truneg_fairseq.core.objectives.electra_rtd import RTD_PARAMS, RTD_PREFIX


def dataclass_field(p: Param, prefix: str):
    """(name, type, field) of an objective's parameter ``p`` for
    :func:`dataclasses.make_dataclass`: fairseq makes its flag and hydra config entry from them."""
    kind = ChoiceEnum(list(p.choices)) if p.choices else p.type
    return prefix + p.name, kind, field(default=p.default, metadata={"help": p.help})


# --electra-gen-weight, --electra-disc-weight, --electra-rtd-synonym-policy (the parameters'
# one definition: core/objectives/electra_rtd.py), and the task's masking rate (the same --mask-prob
# flag; None for tasks without one), which scales the RTD sum to a per-token mean
ReplacedTokenDetectionConfig = make_dataclass(
    "ReplacedTokenDetectionConfig",
    [
        *(dataclass_field(p, RTD_PREFIX) for p in RTD_PARAMS),
        ("mask_prob", Optional[float], field(default=II("oc.select:task.mask_prob,null"))),
    ],
    bases=(FairseqDataclass,),
    namespace={"__module__": __name__},
)

# flags that only mean something when the model has a discriminator, with their defaults
ELECTRA_ONLY = {
    f.name: f.default for f in fields(ReplacedTokenDetectionConfig) if f.name.startswith(RTD_PREFIX)
}


def changed_electra_flags(cfg) -> list:
    """The ELECTRA-only flags set to something other than their default, as on the command line."""
    return [
        "--" + name.replace("_", "-")
        for name, default in ELECTRA_ONLY.items()
        if getattr(cfg, name) != default
    ]
