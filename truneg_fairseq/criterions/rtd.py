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

from dataclasses import dataclass, field, fields
from typing import Optional

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from omegaconf import II

from truneg_fairseq.core import replaced_tokens as electra

RTD_POLICIES = ChoiceEnum(list(electra.RTD_POLICIES))


@dataclass
class ReplacedTokenDetectionConfig(FairseqDataclass):
    electra_gen_weight: float = field(
        default=1.0, metadata={"help": "ELECTRA only: weight of the generator MLM term"}
    )
    electra_disc_weight: float = field(
        default=50.0,
        metadata={"help": "ELECTRA only: weight of the replaced-token-detection term (per token)"},
    )
    electra_rtd_synonym_policy: RTD_POLICIES = field(
        default="replaced",
        metadata={
            "help": "ELECTRA only: label for a sampled replacement that is a WordNet synonym of the "
            "original token: replaced (ELECTRA), original, or ignore (no loss); needs --synonym-table"
        },
    )
    # the task's masking rate (the same --mask-prob flag; None for tasks without one): scales the
    # RTD sum to a per-token mean
    mask_prob: Optional[float] = II("oc.select:task.mask_prob,null")


# flags that only mean something when the model has a discriminator, with their defaults
ELECTRA_ONLY = {
    f.name: f.default for f in fields(ReplacedTokenDetectionConfig) if f.name.startswith("electra_")
}


def changed_electra_flags(cfg) -> list:
    """The ELECTRA-only flags set to something other than their default, as on the command line."""
    return [
        "--" + name.replace("_", "-")
        for name, default in ELECTRA_ONLY.items()
        if getattr(cfg, name) != default
    ]
