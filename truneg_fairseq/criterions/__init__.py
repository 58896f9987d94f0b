"""Criterions registered by the plugin: one per registered objective
(:mod:`truneg_fairseq.core.objectives`; made by ``objective_criteria.py`` over the one base,
``cfn_base.py``): ``mlm_plain`` (the masked-LM baseline with the false-negative statistics),
``mlm_hard_correction``, ``mlm_soft_reg``, ``mlm_sent_kl`` and ``electra`` (generator MLM +
replaced-token detection, whose flags are ``rtd.py``'s), and any objective registered later;
besides them ``cline`` and ``squad``. The loss math is in ``core/``; each criterion reads only
what one call of the model's ``forward`` returns."""

from . import (  # noqa: F401  (registration)
    cline,
    objective_criteria,
    squad,
)
