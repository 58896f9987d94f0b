"""``electra`` (``--criterion electra``): ELECTRA's objective without counter-false-negative
terms, and the parameters of the replaced-token-detection term every objective gets on a model
with a discriminator (:mod:`truneg_fairseq.core.replaced_tokens`)."""

from truneg_fairseq.core.objectives.masked_lm import PlainMaskedLM
from truneg_fairseq.core.objectives.registry import Param, register_objective

RTD_POLICIES = ("replaced", "original", "ignore")

# the discriminator term's parameters, for any objective on an ELECTRA model: the fairseq fields
# carry the prefix (--electra-gen-weight), truneg-hf-train's flags and ElectraPretraining's
# keywords do not (--gen-weight, gen_weight)
RTD_PREFIX = "electra_"
RTD_PARAMS = (
    Param("gen_weight", 1.0, "ELECTRA only: weight of the generator MLM term"),
    Param(
        "disc_weight",
        50.0,
        "ELECTRA only: weight of the replaced-token-detection term (per token)",
    ),
    Param(
        "rtd_synonym_policy",
        "replaced",
        "ELECTRA only: label for a sampled replacement that is a WordNet synonym of the original "
        "token: replaced (ELECTRA), original, or ignore (no loss); needs --synonym-table",
        type=str,
        choices=RTD_POLICIES,
    ),
)


@register_objective
class Electra(PlainMaskedLM):
    """The generator's masked-LM term weighted by ``gen_weight`` plus ``disc_weight`` x the
    discriminator's mean BCE over the tokens; an ELECTRA model only. A synonym table is optional:
    it adds the statistics and the synonym policies of the discriminator's labels."""

    name = "electra"
    criterion = "electra"
    needs_discriminator = True
